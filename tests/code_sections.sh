#!/bin/sh
# code_sections.sh: build-aux/code-sections.py, the way README.md has a
# kernel change checked without a GPU, can be trusted with that.  The same
# kernels compiled into two new caches list the same sections, byte for
# byte (compiles are deterministic, so an unchanged function reads as
# unchanged); a kernel whose code changed lists a different .text (so a
# changed function is seen).  The kernel is a file of two entries, compiled
# with -DSTEP=1 and -DSTEP=2: only the entry that uses STEP may differ.
# Exit 0 when all passed, 1 when any failed, 77 when it cannot run here
# (no tokitai-jit built, or no python3).
. "$(dirname "$0")/isa_prelude.sh"
command -v python3 >/dev/null 2>&1 || { echo "$me: needs python3; skipping"; exit 77; }
case $platform in
  nvidia) arch=sm_80 ;;
  amd) arch=gfx90a ;;
  *) echo "$me: unknown platform '$platform'; skipping"; exit 77 ;;
esac
make_tmp
unset TOKITAI_JIT_CACHE
script=${srcdir:-.}/build-aux/code-sections.py
cat >"$tmp/k.hip" <<'K'
#include "hip/hip_runtime.h"
extern "C" __global__ void stepped(int *p) { p[threadIdx.x] += STEP; }
extern "C" __global__ void fixed(int *p) { p[threadIdx.x] *= 3; }
K
list() {  # list CACHE STEP: the sections of k.hip built with -DSTEP=STEP
  "$prog" --compile "$tmp/k.hip" --entry stepped --entry fixed -D "STEP=$2" \
    --arch $arch --cache "$tmp/$1.db" >"$tmp/$1.out" 2>&1 ||
    { fail "tokitai-jit --compile (STEP=$2):"; cat "$tmp/$1.out"; return 1; }
  python3 "$script" "$tmp/$1.db" >"$tmp/$1.txt" ||
    { fail "code-sections.py $1.db"; return 1; }
}
list a 1 && list b 1 && list c 2 || exit 1
grep -q " $arch \.text" "$tmp/a.txt" ||
  fail "no .text section listed for $arch:"
cmp -s "$tmp/a.txt" "$tmp/b.txt" ||
  { fail "the same source compiled twice lists differently:"; diff "$tmp/a.txt" "$tmp/b.txt"; }
text() { grep " \.text" "$tmp/$1.txt" | grep "$2" ; }
if [ $platform = nvidia ]; then
  # A cubin keeps each entry's code in .text.<entry>.
  [ -n "$(text a '\.text\.stepped ')" ] || fail "no .text.stepped in the cubin"
  [ "$(text a '\.text\.fixed ')" = "$(text c '\.text\.fixed ')" ] ||
    fail "fixed's code changed with STEP, which it does not use"
  [ "$(text a '\.text\.stepped ')" != "$(text c '\.text\.stepped ')" ] ||
    fail "stepped's code did not change with STEP"
else
  [ "$(text a '')" != "$(text c '')" ] || fail "the .text did not change with STEP"
fi
grep "\.text" "$tmp/c.txt"
[ "$failures" -eq 0 ]
