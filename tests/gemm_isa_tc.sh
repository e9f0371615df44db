#!/bin/sh
# gemm_isa_tc.sh: tj_gemm's tensor-core path runs each arch's matrix
# instructions for every layout, in f16 and in bf16.  For each layout
# (nn, nt, tn, tt) and each A and B type, the configuration with a bias
# (so that f16 NN is not tj_gemm_f16's):
#   amd: compiled for gfx90a with tokitai-jit --warm gemm, its code object
#   taken out of the cache and read with LLVM's disassembler, which must
#   show v_mfma_f32_16x16x16f16 (f16) or v_mfma_f32_16x16x16bf16_1k
#   (bf16) and no other matrix instruction, its metadata no VGPR spill;
#   nvidia: kernels/gemm_f16.hip as the library has NVRTC compile it
#   (gemm_epilogue.h first, C++17, cuda_fp16.h included) by the CUDA
#   toolkit's nvcc for sm_80 and sm_90, whose PTX must hold
#   mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 (f16) or its
#   .bf16.bf16 form (bf16) and no other mma, and whose ptxas report no
#   spill.
# This shows which instructions run, not that the results are right
# (check_kernels_gpu does that on a GPU).
# Exit 0 when all passed, 1 when any failed, 77 when it cannot run here
# (no disassembler or nvcc, or no python3).
. "$(dirname "$0")/isa_prelude.sh"
if [ "$platform" = amd ]; then
  arch=gfx90a
  dis=$(for d in $(echo "$PATH" | tr ':' ' '); do
          for f in "$d"/llvm-objdump "$d"/llvm-objdump-[0-9]*; do
            [ -x "$f" ] && echo "$f"
          done
        done | sort -V | tail -n 1)
  readelf=$(echo "$dis" | sed 's/objdump/readelf/')
  [ -n "$dis" ] && [ -x "$readelf" ] && dis="$dis --mcpu=$arch -d" || dis=
else
  dis=$(cuda_tool nvcc) || dis=
fi
if [ -z "$dis" ] || ! command -v python3 >/dev/null 2>&1; then
  echo "$me: needs llvm-objdump and llvm-readelf (amd) or nvcc (nvidia), and python3; skipping"
  exit 77
fi
make_tmp
unset TOKITAI_JIT_CACHE
cache=$tmp/cache.db
# nvidia: configuration $1 (type number) $2 (trans_a) $3 (trans_b) for $4
# into $tmp/k.ptx and the ptxas report $tmp/k.log.
nv_compile() {
  set -- -DTJ_TA=$1 -DTJ_TC=$1 -DTJ_TRANS_A=$2 -DTJ_TRANS_B=$3 -DTJ_EPI=1 \
    -DTJ_GEMM_ENTRY=tc -DTJ_COLSUM_ENTRY=tc_colsum -arch=$4
  "$dis" -x cu -std=c++17 -include cuda_fp16.h -ptx "$@" -o "$tmp/k.ptx" \
    "$tmp/k.cu" >"$tmp/k.log" 2>&1 &&
  "$dis" -x cu -std=c++17 -include cuda_fp16.h -cubin -Xptxas -v "$@" \
    -o "$tmp/k.cubin" "$tmp/k.cu" >"$tmp/k.log" 2>&1
}
if [ "$platform" = nvidia ]; then
  cat "${srcdir:-.}/kernels/gemm_epilogue.h" "${srcdir:-.}/kernels/gemm_f16.hip" >"$tmp/k.cu"
  for arch in sm_80 sm_90; do
    for t in 1 2; do
      for l in 0 1 2 3; do
        name="$arch $([ $t = 1 ] && echo f16 || echo bf16) $(echo nn nt tn tt | cut -d' ' -f$((l + 1)))"
        nv_compile $t $((l & 1)) $((l >> 1)) $arch ||
          { fail "$name: nvcc failed"; sed 's/^/  /' "$tmp/k.log"; continue; }
        want=mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
        [ $t = 2 ] && want=mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
        got=$(grep -c "$want" "$tmp/k.ptx")
        other=$(grep 'mma' "$tmp/k.ptx" | grep -vc "$want")
        spills=$(grep -o '[0-9]* bytes spill stores' "$tmp/k.log" | grep -vc '^0 ')
        [ "$got" -gt 0 ] && [ "$other" -eq 0 ] ||
          fail "$name: $got $want, $other other mma lines"
        [ "$spills" -eq 0 ] || fail "$name: ptxas spills"
        echo "$name: $got $want, no spill"
      done
    done
  done
  [ "$failures" -eq 0 ]
  exit
fi
for t in f16 bf16; do
  for l in nn nt tn tt; do
    name=gemm_${t}_${t}_${t}_${l}_bias_tc
    "$prog" --warm gemm --arch $arch --cache "$cache" --dtype $t --layout $l \
      --epilogue bias --shape 67x45x129 >"$tmp/out" 2>&1 ||
      { fail "--warm gemm --arch $arch --dtype $t --layout $l"; cat "$tmp/out"; continue; }
    co=$tmp/$name.co
    python3 - "$cache" "$name" "$arch" "$co" <<'PY' || { fail "$name: no row in the cache"; continue; }
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
row = db.execute("SELECT code FROM code_objects WHERE kernel LIKE ? || ' %' AND arch = ?",
                 (sys.argv[2], sys.argv[3])).fetchone()
if row is None:
    sys.exit(1)
open(sys.argv[4], "wb").write(row[0])
PY
    $dis "$co" >"$tmp/dis" 2>&1 || { fail "$name: $dis failed"; sed 's/^/  /' "$tmp/dis"; continue; }
    want=v_mfma_f32_16x16x16f16
    [ $t = bf16 ] && want=v_mfma_f32_16x16x16bf16_1k
    got=$(grep -c "$want" "$tmp/dis")
    other=$(grep 'v_mfma\|v_wmma' "$tmp/dis" | grep -vc "$want")
    "$readelf" --notes "$co" >"$tmp/notes" 2>&1
    spill=$(sed -n 's/^ *\.vgpr_spill_count: *//p' "$tmp/notes" | sort -n | tail -n 1)
    [ "${spill:-x}" = 0 ] || fail "$name: ${spill:-?} VGPRs spilled"
    [ "$got" -gt 0 ] && [ "$other" -eq 0 ] ||
      fail "$name ($arch): $got $want, $other other matrix instructions"
    echo "$name ($arch): $got $want, $spill spilled"
  done
done
[ "$failures" -eq 0 ]
