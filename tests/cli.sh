#!/bin/sh
# cli.sh: drive every tokitai-jit command against a real cache on a
# CPU-only machine: warmed with --warm --arch (gfx90a on amd, sm_90 on
# nvidia), listed, summarised, tampered with and repaired, evicted and
# cleared; every usage error; an empty and a missing cache; JSON parsed by
# a JSON parser.  Run by `make check` from the build directory.
# Exit 0 when all passed, 1 when any failed, 77 when the program is absent.
set -u
prog=./tokitai-jit
if [ ! -x "$prog" ]; then
  echo "cli.sh: $prog is not built here ($(pwd)); skipping"
  exit 77
fi
tmp=$(mktemp -d "${TJ_TEST_TMPDIR:-/tmp}/cli.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
cache=$tmp/cache/cache.db
TOKITAI_JIT_CACHE=$cache
export TOKITAI_JIT_CACHE
unset NO_COLOR

checks=0
failures=0
fail() {
  failures=$((failures + 1))
  echo "FAIL: $*"
}

# run STATUS ARG...: run the program, keep its output in $tmp/out and
# $tmp/err, and check its exit status (a crash is never the status wanted).
run() {
  want=$1
  shift
  last="tokitai-jit $*"
  checks=$((checks + 1))
  "$prog" "$@" >"$tmp/out" 2>"$tmp/err"
  got=$?
  if [ "$got" -ne "$want" ]; then
    fail "$last: exit $got, expected $want"
    sed 's/^/  stdout: /' "$tmp/out"
    sed 's/^/  stderr: /' "$tmp/err"
  fi
  if [ "$want" -ne 0 ] && ! grep -q '^tokitai-jit: ' "$tmp/err"; then
    fail "$last: no 'tokitai-jit: ' message on stderr"
  fi
}
# out PATTERN / err PATTERN: the last run's stdout / stderr matches.
out() {
  grep -Eq -- "$1" "$tmp/out" || { fail "$last: stdout lacks /$1/"; sed 's/^/  stdout: /' "$tmp/out"; }
}
err() {
  grep -Eq -- "$1" "$tmp/err" || { fail "$last: stderr lacks /$1/"; sed 's/^/  stderr: /' "$tmp/err"; }
}
no_out() {
  if grep -Eq -- "$1" "$tmp/out"; then fail "$last: stdout has /$1/"; fi
}
absent() {
  if [ -e "$1" ]; then fail "$last created $1"; fi
}

# The JSON parser: python3, else jq, else only a note.
if command -v python3 >/dev/null 2>&1; then
  json_ok() { python3 -c 'import json,sys; json.load(sys.stdin)' <"$tmp/out"; }
elif command -v jq >/dev/null 2>&1; then
  json_ok() { jq -e . <"$tmp/out" >/dev/null; }
else
  echo "note: neither python3 nor jq is installed; JSON output is not parsed"
  json_ok() { return 0; }
fi
json() {
  json_ok || { fail "$last: output is not JSON"; sed 's/^/  stdout: /' "$tmp/out"; }
}
# The n-th number after "NAME": in the last output.
json_number() {
  sed -n "s/.*\"$1\": \([0-9][0-9]*\).*/\1/p" "$tmp/out" | head -n 1
}
have_sqlite3=yes
command -v sqlite3 >/dev/null 2>&1 || {
  have_sqlite3=no
  echo "note: the sqlite3 program is not installed; tampering checks skipped"
}

platform=$("$prog" --version | sed -n 's/^platform: //p')
case $platform in
  amd) arch=gfx90a bad_arch=gfx9999 ;; # gfx1101: known to HIP 5.7, not 5.2
  nvidia) arch=sm_90 bad_arch=sm_12345 ;;
  *) echo "cli.sh: --version names no platform"; exit 99 ;;
esac
kernels=$("$prog" --list-kernels)
nkernels=$(echo "$kernels" | wc -l | tr -d ' ')
echo "platform $platform, arch $arch, $nkernels kernels, cache $cache"

# ------------------------------------------------------------ help, version
run 0 --help
out '^Usage: tokitai-jit'
for cmd in --list-cache --stats --info --list-kernels --warm --run \
    --verify-cache --repair --evict-older-than --max-size --clear-cache \
    --cache --arch --json; do
  out "$cmd"
done
run 0 -h
out '^Usage: tokitai-jit'
run 0 --version
out '^tokitai-jit [0-9]+\.[0-9]+\.[0-9]+$'
out "^platform: $platform\$"
out '^compiler: (hiprtc|nvrtc) [0-9]'
run 0 -V
out '^tokitai-jit '

# ------------------------------------------------------------ usage errors
run 2
err 'no command given'
run 2 --bogus
err "unknown or ambiguous option '--bogus'"
run 2 -x
err "unknown option '-x'"
run 2 --run
err "'--run' needs an argument"
run 2 --list-cache --cache
err "'--cache' needs an argument"
run 2 --stats=yes
err "'--stats' takes no argument"
run 2 --evict-older-than 3x
err "'3x' is not a duration"
run 2 --evict-older-than -1d
err "'-1d' is not a duration"
run 2 --evict-older-than ''
err "'' is not a duration"
run 2 --max-size 12Q
err "'12Q' is not a size"
run 2 --max-size 0
err 'more than 0 bytes'
run 2 --max-size 99999999999T
err "'99999999999T' is too large"
run 2 --evict-older-than 99999999999999999w
err 'is too long'
run 2 --stats --list-cache
err 'cannot be combined'
run 2 --stats extra
err "unexpected argument 'extra'"
run 2 --stats --arch "$arch"
err '--arch applies only to --warm'
run 2 --warm --json
err '--json does not apply to --warm'
run 2 --run add_i32 --n 0
err "--n '0'"
run 2 --run add_i32 --seed x
err "--seed 'x'"
run 2 --list-cache --repair
err '--repair applies only to --verify-cache'
run 2 --color=sometimes --stats
err "'sometimes' is not auto, always or never"
run 2 --list-cache --device 1
err '--device applies only'

# ------------------------------------------------------------ missing cache
# Looking at a cache that does not exist says so, and creates nothing.
run 0 --list-cache
out "^no cache at $cache"
absent "$tmp/cache"
run 0 --list-cache --json
json
out '^\[\]$'
run 0 --stats
out "^no cache at $cache"
run 0 --stats --json
json
out '"exists": false'
run 0 --verify-cache
out "^no cache at $cache"
run 0 --verify-cache --repair
out "^no cache at $cache"
run 0 --evict-older-than 1d
out "^no cache at $cache"
run 0 --clear-cache
out "^no cache at $cache"
run 0 --info
out "$cache \\(not created yet\\)"
run 0 --info --json
json
out '"cache_exists": false'
absent "$tmp/cache"

# ------------------------------------------------------------ warming
run 1 --warm --arch "$arch" no_such_kernel
err "no_such_kernel"
run 1 --warm --arch "$bad_arch"
err "$bad_arch"
err 'not supported'
absent "$tmp/cache"
run 1 --run no_such_kernel
err "no_such_kernel"
run 0 --info
if grep -q 'none visible' "$tmp/out"; then
  gpu=no
  run 1 --warm
  err 'no GPU'
  err '--arch'
  run 1 --run add_i32
  err 'no GPU'
else
  gpu=yes
  echo "note: a GPU is visible; --run is checked for real"
fi

run 0 --warm --arch "$arch"
out "^warmed $nkernels kernels for $arch in $cache: $nkernels compiled"
if [ -s "$tmp/err" ]; then fail "$last: progress or messages on a stderr that is no terminal"; fi
run 0 --warm --arch "$arch" add_i32
out '0 compiled .*, 1 already cached'

# ------------------------------------------------------------ looking
run 0 --list-cache
out '^KEY +KERNEL +ARCH +PLATFORM +COMPILER +SIZE +COMPILE +HITS +LAST USED$'
for k in $kernels; do
  out "^[0-9a-f]{12}  $k +$arch +$platform "
done
out "^$nkernels entries, .* of code, in $cache\$"
no_out "$(printf '\033')"
run 0 --list-cache --color=always
out "$(printf '\033')\\[1m"
run 0 --list-cache --json
json
if [ "$(grep -Ec '"key": "[0-9a-f]{32}"' "$tmp/out")" -ne "$nkernels" ]; then
  fail "$last: not $nkernels entries with a 32-digit key"
fi
out "\"arch\": \"$arch\""
run 0 --list-cache --cache "$cache"
out "^$nkernels entries"

run 0 --stats
out "^cache +$cache\$"
out '^schema version +1$'
out "^entries +$nkernels\$"
out "^misses +$nkernels\$"
out '^hits +1$'
out '^size limit +1\.0 GiB'
out '^compile time saved +[0-9.]+ (ms|s|min)$'
run 0 --stats --json
json
[ "$(json_number entries)" = "$nkernels" ] || fail "$last: entries is not $nkernels"
[ "$(json_number size_limit)" = 1073741824 ] || fail "$last: size_limit is not 1 GiB"

run 0 --info
out "^platform +$platform\$"
out '^compiler +(hiprtc|nvrtc) '
out "^cache +$cache \\($nkernels entries\\)"
out '^embedded kernels +add_i32'
run 0 --info --json
json
out '"devices": \['
run 0 --list-kernels
[ "$(wc -l <"$tmp/out" | tr -d ' ')" = "$nkernels" ] || fail "$last: not $nkernels lines"
run 0 --list-kernels --json
json

if [ "$gpu" = yes ]; then
  run 0 --run add_i32 --n 4096 --seed 7
  run 0 --run add_i32 --n 4096 --json
  json
fi

# ------------------------------------------------------------ verifying
run 0 --verify-cache
out "^checked $nkernels entries in $cache: SQLite integrity check ok, 0 bad\$"
run 0 --verify-cache --json
json
if [ "$have_sqlite3" = yes ]; then
  sqlite3 "$cache" "UPDATE code_objects SET code = zeroblob(length(code)) WHERE kernel = 'add_i32'" ||
    fail "sqlite3 could not tamper with $cache"
  key=$(sqlite3 "$cache" "SELECT key FROM code_objects WHERE kernel = 'add_i32'")
  run 1 --verify-cache
  out "^bad +$key +add_i32 +$arch"
  out ', 1 bad$'
  err 'found 1 bad entry'
  run 1 --verify-cache --json
  json
  out "\"key\": \"$key\""
  out '"repaired": false'
  run 0 --verify-cache --repair
  out '^dropped 1 bad entry$'
  run 0 --verify-cache
  out ", 0 bad\$"
  run 0 --list-cache
  no_out 'add_i32'
  run 0 --warm --arch "$arch" add_i32
  out '1 compiled'
fi

# ------------------------------------------------------------ evicting
run 0 --evict-older-than 30d
out "^evicted 0 entries from $cache; $nkernels entries .* remain\$"
if [ "$have_sqlite3" = yes ]; then
  # gemm_f16 the least recently used; a limit one byte short of the total
  # must evict it and nothing else.
  sqlite3 "$cache" "UPDATE code_objects SET last_used = last_used - 1000 WHERE kernel = 'gemm_f16'"
  run 0 --stats --json
  total=$(json_number bytes)
  run 0 --max-size "$((total - 1))"
  out '^evicted 1 entry '
  run 0 --list-cache
  no_out 'gemm_f16'
  out 'add_i32'
fi
run 0 --max-size 1K
out "^evicted [0-9]+ entr(y|ies) from $cache; 0 entries \\(0 B\\) remain\$"
run 0 --warm --arch "$arch" add_i32 gelu_fwd_f16
run 0 --evict-older-than 0s
out '^evicted 2 entries '

# ------------------------------------------------------------ empty cache
run 0 --list-cache
out "^cache $cache is empty\$"
run 0 --list-cache --json
json
out '^\[\]$'
run 0 --stats
out '^entries +0$'
run 0 --verify-cache
out '^checked 0 entries'

# ------------------------------------------------------------ clearing
run 0 --warm --arch "$arch" add_i32
run 0 --clear-cache
out "^cleared $cache: removed 1 entry"
run 0 --stats --json
json
[ "$(json_number entries)" = 0 ] || fail "$last: entries after --clear-cache"
[ "$(json_number misses)" = 0 ] || fail "$last: misses after --clear-cache"

# ------------------------------------------------------------ --cache PATH
other=$tmp/other/cache.db
run 0 --list-cache --cache "$other"
out "^no cache at $other"
absent "$tmp/other"
run 0 --warm --arch "$arch" --cache "$other" add_i32
out "in $other:"
run 0 --list-cache --cache "$other"
out '^1 entry, '

# ------------------------------------------------------------ unsafe and damaged
chmod 0666 "$other"
run 1 --list-cache --cache "$other"
err "refusing cache file $other"
chmod 0660 "$other"
run 1 --stats --cache "$other"
err 'refusing'
run 0 --stats --cache "$other" --group
out '^entries +1$'
chmod 0600 "$other"

bad=$tmp/bad/cache.db
mkdir -p "$tmp/bad" && chmod 0700 "$tmp/bad"
echo "this is not an SQLite database at all, just some text" >"$bad"
chmod 0600 "$bad"
run 1 --list-cache --cache "$bad"
err "$bad"
run 1 --verify-cache --cache "$bad"
err "$bad"
run 0 --verify-cache --repair --cache "$bad"
err 'moved it to'
out '^checked 0 entries'

# ------------------------------------------------------------ output errors
if [ -w /dev/full ]; then
  checks=$((checks + 1))
  "$prog" --list-kernels >/dev/full 2>"$tmp/err"
  [ $? -eq 1 ] || fail "tokitai-jit --list-kernels >/dev/full: not exit 1"
  grep -q '^tokitai-jit: write error' "$tmp/err" || fail "no write error message"
fi

echo "$checks runs, $failures failed"
[ "$failures" -eq 0 ]
