#!/bin/sh
# gemm_isa.sh: gemm_f16's code object uses each AMD arch's own matrix
# instructions where it has them, and does not spill.  For each arch of
# tests/check_archs --list (from $TJ_TEST_ARCHS), gemm_f16 is compiled with
# tokitai-jit --warm, its code object taken out of the cache and read with
# LLVM's disassembler: v_mfma on gfx908, gfx90a and gfx94x, v_wmma on
# gfx1100 to gfx1103, neither elsewhere (the portable path); no VGPR spills
# and no private segment in its metadata.  This is what can be shown
# without an AMD GPU: that the instructions are there, not that the
# results are right.
# Exit 0 when all passed, 1 when any failed, 77 when it cannot run here
# (not amd, no llvm-objdump / llvm-readelf, no python3).
. "$(dirname "$0")/isa_prelude.sh"
need_platform amd
# llvm-objdump, else the newest llvm-objdump-NN; llvm-readelf beside it.
objdump=
for d in $(echo "$PATH" | tr ':' ' '); do
  for f in "$d"/llvm-objdump "$d"/llvm-objdump-[0-9]*; do
    [ -x "$f" ] && objdump="$objdump $f"
  done
done
objdump=$(for f in $objdump; do echo "$f"; done | sort -V | tail -n 1)
readelf=$(echo "$objdump" | sed 's/objdump/readelf/')
if [ -z "$objdump" ] || [ ! -x "$readelf" ] || ! command -v python3 >/dev/null 2>&1; then
  echo "$me: needs llvm-objdump and llvm-readelf (Debian: llvm) and python3; skipping"
  exit 77
fi
make_tmp
unset TOKITAI_JIT_CACHE
if [ -x tests/check_archs ]; then
  archs=$(tests/check_archs --list | sed -n 1p)
else
  archs=$(echo "${TJ_TEST_ARCHS:-gfx90a}" | tr ',' ' ')
fi
echo "archs: $archs; $($objdump --version | grep -i 'llvm version' | head -n 1)"

checks=0 unchecked=
cache=$tmp/cache.db
for a in $archs; do
  base=${a%%:*}
  checks=$((checks + 1))
  "$prog" --warm --arch "$a" --cache "$cache" gemm_f16 >"$tmp/out" 2>&1 ||
    { fail "tokitai-jit --warm --arch $a gemm_f16"; cat "$tmp/out"; continue; }
  co=$tmp/gemm_f16.$base.co
  python3 - "$cache" "$a" "$co" <<'PY' || { fail "$a: no gemm_f16 row in the cache"; continue; }
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
row = db.execute("SELECT code FROM code_objects WHERE kernel = 'gemm_f16' AND arch = ?",
                 (sys.argv[2],)).fetchone()
if row is None:
    sys.exit(1)
open(sys.argv[3], "wb").write(row[0])
PY
  "$objdump" --mcpu="$base" -d "$co" >"$tmp/dis" 2>"$tmp/dis.err"
  if [ -s "$tmp/dis.err" ] || ! grep -q 'gemm_f16' "$tmp/dis"; then
    echo "note: $objdump cannot disassemble $base; not checked"
    sed 's/^/  /' "$tmp/dis.err"
    unchecked="$unchecked $a"
    continue
  fi
  mfma=$(grep -c 'v_mfma' "$tmp/dis")
  wmma=$(grep -c 'v_wmma' "$tmp/dis")
  case $base in
    gfx908|gfx90a|gfx940|gfx941|gfx942) want=mfma ;;
    gfx1100|gfx1101|gfx1102|gfx1103) want=wmma ;;
    *) want=none ;;
  esac
  case $want in
    mfma) [ "$mfma" -gt 0 ] && [ "$wmma" -eq 0 ] || fail "$a: $mfma v_mfma, $wmma v_wmma; wanted v_mfma" ;;
    wmma) [ "$wmma" -gt 0 ] && [ "$mfma" -eq 0 ] || fail "$a: $mfma v_mfma, $wmma v_wmma; wanted v_wmma" ;;
    none) [ "$mfma" -eq 0 ] && [ "$wmma" -eq 0 ] || fail "$a: $mfma v_mfma, $wmma v_wmma; wanted the portable path" ;;
  esac
  "$readelf" --notes "$co" >"$tmp/notes" 2>&1
  spill=$(sed -n 's/^ *\.vgpr_spill_count: *//p' "$tmp/notes" | head -n 1)
  private=$(sed -n 's/^ *\.private_segment_fixed_size: *//p' "$tmp/notes" | head -n 1)
  vgpr=$(sed -n 's/^ *\.vgpr_count: *//p' "$tmp/notes" | head -n 1)
  [ "$spill" = 0 ] && [ "$private" = 0 ] ||
    fail "$a: gemm_f16 spills: ${spill:-?} VGPRs, ${private:-?} bytes of private segment"
  echo "$a: $want path: $mfma v_mfma, $wmma v_wmma, ${vgpr:-?} VGPRs, ${spill:-?} spilled, private ${private:-?} B"
done
[ -z "$unchecked" ] || echo "not checked (this LLVM lacks them):$unchecked"
echo "$checks archs, $failures failed"
[ "$failures" -eq 0 ]
