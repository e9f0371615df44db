#!/bin/sh
# gemm_isa_skinny.sh: every entry of kernels/gemm_skinny_f16.hip and
# kernels/gemm_skinny_f16_tc.hip that
# tj_gemm_f16 can pick compiles for every arch it can pick it on, and the
# tensor-core entries' code is tensor-core code.  Each gemm_skinny_f16_*
# entry of --list-kernels --all is compiled with tokitai-jit --warm and taken out
# of the cache; then
#   nvidia (sm_80, sm_89, sm_90): a CUDA ELF with the entry's own .text
#     section; in it, HMMA (mma.sync) for the _tc_n entries and none for
#     the FMA entries (_m1 .. _m8) and the reduce.  The SASS is read with
#     cuobjdump -sass or nvdisasm where the CUDA toolkit has one; without
#     either, HMMA is counted from the instruction words themselves (the
#     128-bit Ampere / Hopper encoding keeps the opcode in bits 0-11 and
#     HMMA's is 0x23c), and with a disassembler both counts must agree.
#   amd (gfx90a): an AMD GPU ELF whose symbol table has the entry (the
#     FMA entries are the AMD path; the _tc_ ones are trap stubs there).
# This shows what was compiled, not that the results are right
# (check_kernels_gpu does that on a GPU).
# Exit 0 when all passed, 1 when any failed, 77 when it cannot run here
# (no tokitai-jit built, or no python3).
. "$(dirname "$0")/isa_prelude.sh"
command -v python3 >/dev/null 2>&1 || { echo "$me: needs python3; skipping"; exit 77; }
case $platform in
  nvidia) archs="sm_80 sm_89 sm_90" ;;
  amd) archs="gfx90a" ;;
  *) echo "$me: unknown platform '$platform'; skipping"; exit 77 ;;
esac
dis=
if [ "$platform" = nvidia ]; then
  dis=$(cuda_tool cuobjdump) && dis="$dis -sass" || dis=$(cuda_tool nvdisasm)
  echo "SASS read with: ${dis:-the opcode field of each instruction word (no cuobjdump or nvdisasm found)}"
fi
make_tmp
unset TOKITAI_JIT_CACHE
cache=$tmp/cache.db
entries=$("$prog" --list-kernels --all | sed -n 's/^\(gemm_skinny_f16_[a-z0-9_]*\).*/\1/p')
for want in gemm_skinny_f16_m1 gemm_skinny_f16_m8 gemm_skinny_f16_tc_n32 \
            gemm_skinny_f16_tc_n64 gemm_skinny_f16_tc_reduce; do
  echo "$entries" | grep -qx "$want" || { echo "FAIL: --list-kernels lacks $want"; exit 1; }
done
checks=0

# elf.py FILE ENTRY MODE: "cuda": the words of section .text.ENTRY, and
# how many have HMMA's opcode (prints "<instructions> <hmma>"; exit 1
# without the section or when not EM_CUDA); "amd": exit 1 unless EM_AMDGPU
# with ENTRY in its symbol table.
cat >"$tmp/elf.py" <<'PY'
import struct, sys
path, entry, mode = sys.argv[1:4]
d = open(path, "rb").read()
if d[:4] != b"\x7fELF" or d[4] != 2:
    sys.exit("not a 64-bit ELF")
machine, = struct.unpack_from("<H", d, 18)
shoff, = struct.unpack_from("<Q", d, 0x28)
shentsize, shnum, shstrndx = struct.unpack_from("<HHH", d, 0x3a)
sh = [struct.unpack_from("<IIQQQQIIQQ", d, shoff + i * shentsize) for i in range(shnum)]
def cstr(off):
    return d[off:d.index(b"\0", off)].decode()
names = [cstr(sh[shstrndx][4] + s[0]) for s in sh]
if mode == "cuda":
    if machine != 190:
        sys.exit("e_machine %d, not EM_CUDA" % machine)
    if ".text." + entry not in names:
        sys.exit("no section .text." + entry)
    s = sh[names.index(".text." + entry)]
    text = d[s[4]:s[4] + s[5]]
    words = [struct.unpack_from("<Q", text, i)[0] for i in range(0, len(text) - 15, 16)]
    print(len(words), sum(1 for w in words if w & 0xfff == 0x23c))
else:
    if machine != 224:
        sys.exit("e_machine %d, not EM_AMDGPU" % machine)
    for i, s in enumerate(sh):
        if s[1] != 2:  # SHT_SYMTAB
            continue
        strtab = sh[s[6]][4]
        for off in range(s[4], s[4] + s[5], 24):
            if cstr(strtab + struct.unpack_from("<I", d, off)[0]) == entry:
                sys.exit(0)
    sys.exit("no symbol " + entry)
PY

for a in $archs; do
  "$prog" --warm --arch "$a" --cache "$cache" $entries >"$tmp/out" 2>&1 ||
    { fail "tokitai-jit --warm --arch $a $entries"; cat "$tmp/out"; continue; }
  for e in $entries; do
    checks=$((checks + 1))
    co=$tmp/$e.$a.co
    python3 - "$cache" "$e" "$a" "$co" <<'PY' || { fail "$e: no $a row in the cache"; continue; }
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
row = db.execute("SELECT code FROM code_objects WHERE kernel = ? AND arch = ?",
                 (sys.argv[2], sys.argv[3])).fetchone()
if row is None:
    sys.exit(1)
open(sys.argv[4], "wb").write(row[0])
PY
    if [ "$platform" = amd ]; then
      python3 "$tmp/elf.py" "$co" "$e" amd >"$tmp/elf.out" 2>&1 ||
        { fail "$e ($a): $(cat "$tmp/elf.out")"; continue; }
      echo "$e ($a): entry symbol present"
      continue
    fi
    counts=$(python3 "$tmp/elf.py" "$co" "$e" cuda 2>&1) ||
      { fail "$e ($a): $counts"; continue; }
    words=${counts% *} hmma=${counts#* } how="opcode field"
    if [ -n "$dis" ]; then
      $dis "$co" >"$tmp/sass" 2>&1 || { fail "$e ($a): $dis failed"; sed 's/^/  /' "$tmp/sass"; continue; }
      awk -v e="$e" '/Function *: / || /\.text\./ { on = index($0, e) > 0 } on' "$tmp/sass" >"$tmp/own"
      # One line per instruction; HGMMA is not HMMA.
      shown=$(grep -c '[^G]HMMA' "$tmp/own")
      [ "$shown" = "$hmma" ] ||
        fail "$e ($a): $dis shows $shown HMMA, the opcode field counts $hmma"
      hmma=$shown how=$dis
    fi
    case $e in
      gemm_skinny_f16_tc_n*) [ "$hmma" -gt 0 ] || fail "$e ($a): no HMMA; wanted tensor cores" ;;
      *) [ "$hmma" -eq 0 ] || fail "$e ($a): $hmma HMMA; wanted none" ;;
    esac
    echo "$e ($a): $words instructions, $hmma HMMA ($how)"
  done
done
echo "$checks code objects, $failures failed"
[ "$failures" -eq 0 ]
