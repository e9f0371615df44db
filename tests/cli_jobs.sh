#!/bin/sh
# cli_jobs.sh: tokitai-jit --warm and --compile with several compiles at
# once (-j, --jobs): the same cache rows as one at a time, the output in
# the same order, -j and --quiet checked, a progress line only on a
# terminal, and TOKITAI_JIT_TRACE's line.  The sanitizer lanes run it on
# their build (README.md, "Sanitizers").
# Exit 0 when all passed, 1 when any failed, 77 when the program is absent.
. "$(dirname "$0")/cli_prelude.sh"
TOKITAI_JIT_CACHE=$tmp/default/cache.db
export TOKITAI_JIT_CACHE
unset TOKITAI_JIT_TRACE

quiet_err() {
  if [ -s "$tmp/err" ]; then
    fail "$last: wrote on a stderr that is no terminal"
    sed 's/^/  stderr: /' "$tmp/err"
  fi
}

case $("$prog" --version | sed -n 's/^platform: //p') in
  amd) a1=gfx90a a2=gfx1030 ;;
  nvidia) a1=sm_90 a2=sm_80 ;;
  *) echo "cli_jobs.sh: unknown platform"; exit 99 ;;
esac
kernels="add_i32 gelu_fwd_f16"

# ------------------------------------------------------------ -j and --quiet
for bad in 0 -1 257 x 1.5 ""; do
  run 2 --warm --arch "$a1" -j "$bad"
  err "jobs '$bad' is not a whole number from 1 to 256"
done
run 2 --warm --arch "$a1" --jobs=99999999999999999999
err 'not a whole number from 1 to 256'
run 2 --warm --arch "$a1" -j
err "option '-j' needs an argument"
run 2 --list-cache -j 2
err '--jobs applies only to --warm and --compile'
run 2 --stats --quiet
err '--quiet applies only to --warm and --compile'
if [ -e "$tmp/default" ]; then fail "a usage error created the cache"; fi

# ------------------------------------------------------------ the same rows
# Two archs, two kernels: four compiles, in two workers and in one
# process; the rows (key, kernel, arch) are the same: for each arch,
# add_i32's and one for every entry of gelu_fwd_f16's file, stored with
# its compile.
ngelu=$("$prog" --list-kernels --json | grep -c '"file": "gelu_f16.hip"')
# shellcheck disable=SC2086
run 0 --warm --arch "$a1" --arch "$a2" --cache "$tmp/par/cache.db" -j 2 $kernels
quiet_err
out "^warmed 2 kernels for $a1, $a2 in $tmp/par/cache.db: 4 compiled"
sed 's/ compiled ([^)]*)/ compiled/' "$tmp/out" >"$tmp/par.out"
# shellcheck disable=SC2086
run 0 --warm --arch "$a1" --arch "$a2" --cache "$tmp/ser/cache.db" -j 1 $kernels
quiet_err
sed 's/ compiled ([^)]*)/ compiled/; s|/ser/|/par/|' "$tmp/out" >"$tmp/ser.out"
checks=$((checks + 1))
cmp -s "$tmp/par.out" "$tmp/ser.out" || fail "-j 2 and -j 1 print differently: $(cat "$tmp/par.out") / $(cat "$tmp/ser.out")"
rows() {
  "$prog" --list-cache --cache "$1" | awk 'NR > 1 && length($1) == 12 && $1 !~ /[^0-9a-f]/ { print $1, $2, $3 }' | sort
}
rows "$tmp/par/cache.db" >"$tmp/par.rows"
rows "$tmp/ser/cache.db" >"$tmp/ser.rows"
checks=$((checks + 1))
if [ "$(wc -l <"$tmp/par.rows")" -ne $((2 * (1 + ngelu))) ] || ! cmp -s "$tmp/par.rows" "$tmp/ser.rows"; then
  fail "-j 2 and -j 1 stored different rows:"
  diff "$tmp/par.rows" "$tmp/ser.rows"
fi
# The full keys too, from JSON.
"$prog" --list-cache --json --cache "$tmp/par/cache.db" | grep -o '"key": "[0-9a-f]*"' | sort >"$tmp/par.keys"
"$prog" --list-cache --json --cache "$tmp/ser/cache.db" | grep -o '"key": "[0-9a-f]*"' | sort >"$tmp/ser.keys"
checks=$((checks + 1))
if [ ! -s "$tmp/par.keys" ] || ! cmp -s "$tmp/par.keys" "$tmp/ser.keys"; then
  fail "-j 2 and -j 1: the keys differ"
fi
run 0 --verify-cache --cache "$tmp/par/cache.db"
out ', 0 bad$'
# Warm again in parallel: everything is cached, nothing compiles.
# shellcheck disable=SC2086
run 0 --warm --arch "$a1" --arch "$a2" --cache "$tmp/par/cache.db" -j 2 $kernels
out ': 0 compiled .*, 0 stored with their file, 4 already cached$'
# Entries of one file in two workers: the file compiles once, in the
# first pass; the other entry is stored with it, whatever -j.
for j in 2 1; do
  run 0 --warm --arch "$a1" --cache "$tmp/file$j/cache.db" -j $j gelu_bwd_f16 gelu_fwd_f16 add_i32
  out ": 2 compiled \([^)]*\), 1 stored with their file, 0 already cached$"
done
# A failure in a worker is the command's: a bad kernel name is refused
# before anything starts; --quiet prints only errors.
run 1 --warm --arch "$a1" --cache "$tmp/par/cache.db" -j 2 add_i32 no_such_kernel
err "no embedded kernel is named 'no_such_kernel'"
run 0 --warm --arch "$a1" --cache "$tmp/par/cache.db" -j 2 -q add_i32 gelu_fwd_f16
checks=$((checks + 1))
if [ -s "$tmp/out" ] || [ -s "$tmp/err" ]; then fail "$last: --quiet printed something"; fi

# ------------------------------------------------------------ --compile
src=${srcdir:-.}/tests/hip/saxpy.hip
run 0 --compile "$src" --entry saxpy_f32 --arch "$a2" --arch "$a1" \
  --cache "$tmp/mod/cache.db" -j 2
quiet_err
# In --arch order whichever worker ends first.
checks=$((checks + 1))
if [ "$(grep -c ': compiled in' "$tmp/out")" -ne 2 ] ||
   [ "$(sed -n '1s/.* for \([^:]*\):.*/\1/p' "$tmp/out")" != "$a2" ]; then
  fail "$last: not one line per arch in --arch order"
  sed 's/^/  stdout: /' "$tmp/out"
fi
run 0 --compile "$src" --entry saxpy_f32 --arch "$a2" --arch "$a1" \
  --cache "$tmp/mod/cache.db" -j 2 --json
out '^\[$'
out "\"arch\": \"$a2\".*\"origin\": \"cache\""
if command -v python3 >/dev/null 2>&1; then
  checks=$((checks + 1))
  python3 -c 'import json,sys; d=json.load(sys.stdin); assert [x["arch"] for x in d] == sys.argv[1:], d' \
    "$a2" "$a1" <"$tmp/out" || fail "$last: JSON not in --arch order"
fi
run 1 --compile "$src" --entry no_such_entry --arch "$a1" --arch "$a2" \
  --cache "$tmp/mod/cache.db" -j 2
err "for $a1: .*no_such_entry"
err "for $a2: .*no_such_entry"
# The messages in --arch order too.
checks=$((checks + 1))
if [ "$(grep -n "for $a1: " "$tmp/err" | head -n 1 | cut -d: -f1)" -gt \
     "$(grep -n "for $a2: " "$tmp/err" | head -n 1 | cut -d: -f1)" ]; then
  fail "$last: the errors are not in --arch order"
fi

# ------------------------------------------------------------ progress
# On a terminal (script(1) gives one), the progress line; none with
# --quiet.
if command -v script >/dev/null 2>&1 &&
   script -qec true /dev/null >/dev/null 2>&1; then
  checks=$((checks + 1))
  script -qec "$prog --warm --arch $a1 --cache $tmp/tty/cache.db -j 2 add_i32 gelu_fwd_f16" \
    /dev/null >"$tmp/tty.out" 2>&1 </dev/null
  grep -q '\[[0-9]/2\] ' "$tmp/tty.out" || fail "no progress line on a terminal: $(cat -v "$tmp/tty.out")"
  checks=$((checks + 1))
  script -qec "$prog --warm --arch $a2 --cache $tmp/tty/cache.db -j 2 --quiet add_i32 gelu_fwd_f16" \
    /dev/null >"$tmp/tty.out" 2>&1 </dev/null
  if [ -s "$tmp/tty.out" ]; then fail "--quiet on a terminal printed: $(cat -v "$tmp/tty.out")"; fi
else
  echo "note: script(1) cannot give a terminal here; the progress line is not checked"
fi

# ------------------------------------------------------------ TOKITAI_JIT_TRACE
TOKITAI_JIT_TRACE=1 "$prog" --warm --arch "$a1" --cache "$tmp/par/cache.db" -j 1 add_i32 \
  >"$tmp/out" 2>"$tmp/err"
last="TOKITAI_JIT_TRACE=1 tokitai-jit --warm"
err "^tokitai-jit trace: $a1 open [0-9.]+ ms = identity [0-9.]+ .*cache [0-9.]+ \(location [0-9.]+, sqlite-open .*prepare [0-9.]+\); 1 kernels and 0 modules built: key .*lookup .*load [0-9.]+ ms.*close [0-9.]+ ms$"
TOKITAI_JIT_TRACE=0 "$prog" --warm --arch "$a1" --cache "$tmp/par/cache.db" -j 1 add_i32 \
  >"$tmp/out" 2>"$tmp/err"
last="TOKITAI_JIT_TRACE=0 tokitai-jit --warm"
quiet_err

finish
