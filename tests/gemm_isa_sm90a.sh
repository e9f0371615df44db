#!/bin/sh
# gemm_isa_sm90a.sh: the Hopper GEMM's code is Hopper's.  Every
# configuration of tj_gemm_f16 that tokitai-jit --warm --arch sm_90 (a
# device's own arch) compiles (gemm_sm90a.hip, one code object for each
# kind and tile, each skinny strip and cluster) must land in the cache as
# an sm_90a row, and its SASS (cuobjdump -sass, else nvdisasm) must hold
# HGMMA (wgmma) and no HMMA (mma.sync).  This shows which instructions
# run, not that the results are right (check_kernels_gpu does that on the
# GPU).
# Exit 0 when all passed, 1 when any failed, 77 when it cannot run here
# (not nvidia, or neither disassembler found, or no python3).
. "$(dirname "$0")/isa_prelude.sh"
need_platform nvidia
dis=$(cuda_tool cuobjdump) && dis="$dis -sass" || dis=$(cuda_tool nvdisasm)
if [ -z "$dis" ] || ! command -v python3 >/dev/null 2>&1; then
  echo "$me: needs cuobjdump or nvdisasm (CUDA toolkit) and python3; skipping"
  exit 77
fi
make_tmp
unset TOKITAI_JIT_CACHE
cache=$tmp/cache.db
"$prog" --warm --arch sm_90 --cache "$cache" >"$tmp/out" 2>&1 ||
  { echo "FAIL: tokitai-jit --warm --arch sm_90"; cat "$tmp/out"; exit 1; }
# A configuration's row names its entries, the product's first.
entries=$(python3 - "$cache" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
for (k,) in db.execute("SELECT kernel FROM code_objects WHERE arch = 'sm_90a'"):
    first = k.split(" ")[0]
    if first.startswith("gemm_f16_f16_f16_nn_none_sm90a_"):
        print(first)
PY
)
n=$(echo $entries | wc -w)
[ "$n" -eq 17 ] || fail "--warm --arch sm_90 stored $n sm_90a configurations of tj_gemm_f16, not 17"
for e in $entries; do
  python3 - "$cache" "$e" "$tmp/$e.cubin" <<'PY' || { fail "$e: no sm_90a row in the cache"; continue; }
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
row = db.execute("SELECT code FROM code_objects WHERE arch = 'sm_90a' AND "
                 "(kernel = ?1 OR kernel LIKE ?1 || ' %')",
                 (sys.argv[2],)).fetchone()
if row is None:
    sys.exit(1)
open(sys.argv[3], "wb").write(row[0])
PY
  $dis "$tmp/$e.cubin" >"$tmp/$e.sass" 2>&1 || { fail "$e: $dis failed"; sed 's/^/  /' "$tmp/$e.sass"; continue; }
  # Only the entry's own function: the cubin holds every entry of the file.
  awk -v e="$e" '/Function *: / || /\.text\./ { on = index($0, e) > 0 } on' "$tmp/$e.sass" >"$tmp/$e.own"
  hgmma=$(grep -c 'HGMMA' "$tmp/$e.own")
  hmma=$(grep -c 'HMMA' "$tmp/$e.own")
  [ "$hgmma" -gt 0 ] && [ "$hmma" -eq 0 ] || fail "$e: $hgmma HGMMA, $hmma HMMA; wanted HGMMA only"
  echo "$e (sm_90a): $hgmma HGMMA, $hmma HMMA"
done
[ "$failures" -eq 0 ]
