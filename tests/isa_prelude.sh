# isa_prelude.sh: what the compiled-code checks share (gemm_isa.sh,
# gemm_isa_sm90a.sh, gemm_isa_skinny.sh, gemm_ptxas_sm90a.sh), sourced by
# each from its own folder.  It skips (exit 77) when ./tokitai-jit is not
# built here; sets $me, $prog and $platform (what tokitai-jit --version
# says); gives need_platform, cuda_tool and fail (counting into
# $failures).  Each script makes its $tmp with make_tmp once it knows it
# can run.
set -u
me=$(basename "$0")
prog=./tokitai-jit
[ -x "$prog" ] || { echo "$me: $prog is not built here; skipping"; exit 77; }
platform=$("$prog" --version | sed -n 's/^platform: //p')
failures=0

# need_platform P: skip unless this build is for platform P.
need_platform() {
  [ "$platform" = "$1" ] || { echo "$me: not the $1 platform; skipping"; exit 77; }
}

# cuda_tool NAME: the CUDA toolkit's NAME, from PATH or /usr/local/cuda/bin
# (status 1 and nothing printed where neither has it).
cuda_tool() {
  for d in $(echo "$PATH" | tr ':' ' ') /usr/local/cuda/bin; do
    if [ -x "$d/$1" ]; then echo "$d/$1"; return 0; fi
  done
  return 1
}

# make_tmp: $tmp, a private folder removed at exit.
make_tmp() {
  tmp=$(mktemp -d "${TJ_TEST_TMPDIR:-/tmp}/${me%.sh}.XXXXXX") || exit 99
  trap 'rm -rf "$tmp"' EXIT
}

fail() { failures=$((failures + 1)); echo "FAIL: $*"; }
