#!/bin/sh
# gemm_isa_sm90a.sh: the Hopper GEMM's code is Hopper's.  Each tile and
# skinny entry (kernels/gemm_f16_sm90a.hip, gemm_f16_sm90a_skinny.hip,
# and gemm_f16_sm90a_extra.hip) is compiled with tokitai-jit --warm --arch
# sm_90 (a device's own arch), must land in the cache as an sm_90a row,
# and its SASS (cuobjdump -sass, else nvdisasm) must hold HGMMA (wgmma)
# and no HMMA (mma.sync).  This shows which instructions run, not that
# the results are right (check_kernels_gpu does that on the GPU).
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
# Every entry with a tile in its name (128x64_cluster_k2 and 128x256_mc2
# too) and the skinny ones; the split-K reduce holds no matrix
# instruction.
entries=$("$prog" --list-kernels --all | sed -n 's/^\(gemm_f16_sm90a_\([0-9][0-9]*x[0-9][0-9]*\|skinny\)[a-z0-9_]*\)\( .*\)\{0,1\}$/\1/p')
[ -n "$entries" ] || { echo "FAIL: --list-kernels names no gemm_f16_sm90a_ entry"; exit 1; }
for e in $entries; do
  "$prog" --warm --arch sm_90 --cache "$cache" "$e" >"$tmp/out" 2>&1 ||
    { fail "tokitai-jit --warm --arch sm_90 $e"; cat "$tmp/out"; continue; }
  python3 - "$cache" "$e" "$tmp/$e.cubin" <<'PY' || { fail "$e: no sm_90a row in the cache"; continue; }
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
row = db.execute("SELECT code FROM code_objects WHERE kernel = ? AND arch = 'sm_90a'",
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
