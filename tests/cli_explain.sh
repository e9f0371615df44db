#!/bin/sh
# cli_explain.sh: tokitai-jit --explain against a real cache on a CPU-only
# machine: an embedded kernel with no row, cached, and asked for another
# arch; a module (--explain FILE --entry) whose source, option and header
# change; the usage errors.  Exit 0 whether cached or not: it answered.
# Exit 0 when all passed, 1 when any failed, 77 when the program is absent.
. "$(dirname "$0")/cli_prelude.sh"
cache=$tmp/cache/cache.db
TOKITAI_JIT_CACHE=$cache
export TOKITAI_JIT_CACHE

platform=$("$prog" --version | sed -n 's/^platform: //p')
case $platform in
  amd) arch=gfx90a other=gfx1030 ;;
  nvidia) arch=sm_90 other=sm_80 ;;
  *) echo "cli_explain.sh: --version names no platform"; exit 99 ;;
esac

# ------------------------------------------------------------ embedded
run 0 --warm add_i32 --arch "$arch" --quiet
run 0 --explain add_i32 --arch "$arch"
out "^add_i32: cached for $arch \(key [0-9a-f]{32}\)\$"
run 0 --explain add_i32 --arch "$other"
out "^add_i32: not cached for $other: its one row \(key [0-9a-f]{16}\) differs in the arch \('$other' here, '$arch' there\)\$"
run 0 --explain gelu_fwd_f16 --arch "$arch"
out "^gelu_fwd_f16: not cached for $arch: no row for this entry\$"
# One line per --arch, in order.
run 0 --explain add_i32 --arch "$arch" --arch "$other"
out "^add_i32: cached for $arch "
out "^add_i32: not cached for $other: "
run 1 --explain no_such_kernel --arch "$arch"
err "no embedded kernel is named 'no_such_kernel'"

# ------------------------------------------------------------ a module
kdir=$tmp/kernels
mkdir -p "$kdir/inc"
kfile=$kdir/k.hip
cat >"$kfile" <<'EOS'
#include "defs.h"
extern "C" __global__ void fill(float *x) { x[0] = MYVAL + N; }
EOS
echo '#define MYVAL 3' >"$kdir/inc/defs.h"
run 0 --explain "$kfile" --entry fill --arch "$arch" -I "$kdir/inc" -D N=1
out "^$kfile: not cached for $arch: no row for this entry\$"
run 0 --compile "$kfile" --entry fill --arch "$arch" -I "$kdir/inc" -D N=1 --quiet
run 0 --explain "$kfile" --entry fill --arch "$arch" -I "$kdir/inc" -D N=1
out "^$kfile: cached for $arch "
run 0 --explain "$kfile" --entry fill --arch "$arch" -I "$kdir/inc" -D N=2
out "differs in the options \('-I $kdir/inc -DN=2' here, '-I $kdir/inc -DN=1' there\)\$"
echo '#define MYVAL 4' >"$kdir/inc/defs.h"
run 0 --explain "$kfile" --entry fill --arch "$arch" -I "$kdir/inc" -D N=1
out "differs in a header file reached through the include paths\$"
echo '#define MYVAL 3' >"$kdir/inc/defs.h"
echo '// changed' >>"$kfile"
run 0 --explain "$kfile" --entry fill --arch "$arch" -I "$kdir/inc" -D N=1
out "differs in the source\$"
# --explain only looks: a cache that is not there is not made.
run 1 --explain add_i32 --arch "$arch" --cache "$tmp/none/cache.db"
if [ -e "$tmp/none/cache.db" ]; then fail "$last created a cache"; fi

# ------------------------------------------------------------ usage
run 2 --explain ''
err "--explain needs a kernel name or a file"
run 2 --explain add_i32 -D N=1
err "apply to --explain FILE with --entry NAME"
run 2 --explain add_i32 --json
err "--json does not apply to --explain"
run 2 --explain add_i32 --warm
err "cannot be combined"
run 1 --explain "$tmp/absent.hip" --entry fill --arch "$arch"
err "cannot open $tmp/absent.hip"

finish
