#!/bin/sh
# cli_archs.sh: tokitai-jit --warm --arch ARCH --cache FILE for each arch of
# $TJ_TEST_ARCHS (the HIP 5.7 lane: gfx1101 gfx1100 gfx942 gfx90a): every
# embedded kernel is compiled and stored under that arch, a second warm
# compiles nothing, and the archs' rows stay apart.  Each arch this HIP
# lacks is refused with a message, exit 1 and no cache file, where hipRTC
# would abort.  The lists come from tests/check_archs --list (the same
# defaults as that suite); without it, only a made-up arch is refused.
# Exit 0 when all passed, 1 when any failed, 77 when the program is absent.
. "$(dirname "$0")/cli_prelude.sh"
unset TOKITAI_JIT_CACHE NO_COLOR

if [ -x tests/check_archs ]; then
  tests/check_archs --list >"$tmp/lists" || exit 99
  archs=$(sed -n 1p "$tmp/lists")
  refused=$(sed -n 2p "$tmp/lists")
else
  case $("$prog" --version | sed -n 's/^platform: //p') in
    nvidia) archs=${TJ_TEST_ARCHS:-sm_90} refused=sm_12345 ;;
    *) archs=${TJ_TEST_ARCHS:-gfx90a} refused=gfx9999 ;;
  esac
  archs=$(echo "$archs" | tr ',' ' ')
fi
# The names: the lines of --list-kernels --all that start a kernel's
# block (--warm compiles the configurations too).
kernels=$("$prog" --list-kernels --all | grep -E '^[A-Za-z_][A-Za-z0-9_]*$')
nkernels=$(echo "$kernels" | wc -l | tr -d ' ')
# A compile covers a whole kernels/ file: --warm compiles once per file.
nfiles=$("$prog" --list-kernels --all --json | grep -o '"file": "[^"]*"' | sort -u | wc -l | tr -d ' ')
# The arch a kernel's row names: the one it was warmed for (no embedded
# kernel is written for an arch-specific target).
row_arch() { echo "$2"; }
echo "archs: $archs; refused: $refused; $nkernels kernels"
# An arch as an extended regular expression: gfx90a:xnack+ has a '+'.
ere() { printf '%s\n' "$1" | sed 's/[][\.*^$+?(){}|]/\\&/g'; }

cache=$tmp/archs/cache.db
n=0
configs=0
for a in $archs; do
  n=$((n + 1))
  run 0 --warm --arch "$a" --cache "$cache"
  out "^warmed $nkernels kernels for $a in $cache: $nfiles compiled \([^)]*\), $((nkernels - nfiles)) stored with their file, 0 already cached\$"
  # tj_gemm_f16's generated configurations (sm_90: sm_90a rows, which
  # sm_90 and sm_90a share), each compiled once.
  got=$(sed -n 's/^warmed [0-9]* GEMM configurations in .*: \([0-9]*\) compiled .*/\1/p' "$tmp/out")
  configs=$((configs + ${got:-0}))
  run 0 --warm --arch "$a" --cache "$cache"
  out "0 compiled.*, 0 stored with their file, $nkernels already cached"
  run 0 --list-cache --cache "$cache"
  for k in $kernels; do
    ra=$(row_arch "$k" "$a")
    out "^[0-9a-f]{12}  $k +$(ere "$ra") "
    echo "$ra" >>"$tmp/row_archs"
  done
  # Every arch's rows so far, not only $a's: a warm for sm_90 also stores
  # sm_90a rows, which a later sm_90a in the list must not count as its own.
  for ra in $(sort -u "$tmp/row_archs"); do
    want=$(grep -cxF -- "$ra" "$tmp/row_archs")
    rows=$(grep -Ec "^[0-9a-f]{12}  [^ ]+ +$(ere "$ra") " "$tmp/out")
    [ "$rows" -eq "$want" ] || fail "$last: $rows rows for $ra, not $want"
  done
  run 0 --stats --cache "$cache"
  out "^entries +$((n * nkernels + configs))\$"
done

for a in $refused; do
  fresh=$tmp/refused-$a/cache.db
  run 1 --warm --arch "$a" --cache "$fresh"
  err "$a"
  err 'not supported'
  [ ! -e "$tmp/refused-$a" ] || fail "$last created $tmp/refused-$a"
done

finish
