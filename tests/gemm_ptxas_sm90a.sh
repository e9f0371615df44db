#!/bin/sh
# gemm_ptxas_sm90a.sh: every entry of the sm_90a kernel files (those
# marked "embed: arch sm_90a", each after the headers it names), of the
# GEMM family's Hopper configurations (gemm_sm90a.hip: every kind and
# tile tj_gemm_f16 runs, f16 NN without an epilogue, and one of each kind
# with a mix of types, layouts and epilogues) and of the grouped GEMM's
# (gemm_grouped_sm90a.hip), compiles for sm_90a with no register
# spills, no stack frame, and no ptxas note
# of lost performance (its "wgmma.mma_async instructions are serialized"
# is one: the tensor cores then wait for each instruction in turn).  Each
# is a cliff in speed that the results, and so the GPU suites, never show,
# and that this CPU-only check can.  The file is compiled as the library
# has NVRTC compile it (sm_90a, C++17, cuda_fp16.h included first), by
# the CUDA toolkit's nvcc with ptxas's -v report.  Every entry must be in
# that report, and every one but the split-K reduce, the column sums and
# the copies must hold wgmma.mma_async and no mma.sync in its PTX
# (what gemm_isa_sm90a.sh checks in the SASS where a disassembler is).
# Exit 0 when all passed, 1 when any failed, 77 when it cannot run here
# (not the nvidia platform, or no nvcc).
. "$(dirname "$0")/isa_prelude.sh"
kernels=${srcdir:-.}/kernels
need_platform nvidia
nvcc=$(cuda_tool nvcc) || { echo "$me: needs the CUDA toolkit's nvcc; skipping"; exit 77; }
make_tmp
# Each sm_90a file ("embed: arch sm_90a") as the library compiles it:
# what its "embed: prepend" names, then the file (build-aux/embed.sh);
# the reports of all of them together.
: >"$tmp/log"
: >"$tmp/g.ptx"
# $1 (kernels/NAME.hip) as the library compiles it, into $tmp/$2.cu.
as_embedded() {
  local parts part
  parts=$(sed -n 's/^ \* embed: prepend \([A-Za-z0-9_. -]*\)$/\1/p' "$1" | head -n 1)
  : >"$tmp/$2.cu"
  for part in $parts; do cat "$kernels/$part" >>"$tmp/$2.cu"; done
  cat "$1" >>"$tmp/$2.cu"
}
# $tmp/$1.cu compiled with the options after it; its reports added.
compile() {
  local f=$1
  shift
  "$nvcc" -x cu -arch=sm_90a -std=c++17 -include cuda_fp16.h -cubin \
    -Xptxas -v "$@" -o "$tmp/$f.cubin" "$tmp/$f.cu" >"$tmp/$f.log" 2>&1 ||
    { echo "FAIL: $nvcc could not compile $f for sm_90a:"; cat "$tmp/$f.log"; exit 1; }
  "$nvcc" -x cu -arch=sm_90a -std=c++17 -include cuda_fp16.h -ptx "$@" \
    -o "$tmp/$f.ptx" "$tmp/$f.cu" >"$tmp/$f.ptxlog" 2>&1 ||
    { echo "FAIL: $nvcc could not make PTX of $f:"; cat "$tmp/$f.ptxlog"; exit 1; }
  cat "$tmp/$f.log" >>"$tmp/log"
  cat "$tmp/$f.ptx" >>"$tmp/g.ptx"
}
for path in "$kernels"/*.hip; do
  grep -q '^ \* embed: arch sm_90a$' "$path" || continue
  f=$(basename "$path" .hip)
  as_embedded "$path" "$f"
  compile "$f"
done
# The family's configurations: TJ_TA TJ_TC TJ_TRANS_A TJ_TRANS_B TJ_EPI
# TJ_H_KIND TJ_H_BN TJ_H_STAGES TJ_H_SPLIT, one line each; entries
# family<i>, with _reduce (split-K) and _colsum (dGELU).  First
# tj_gemm_f16's (f16 = 1, NN, none): each kind and tile (gemm/configs.c),
# each skinny strip and cluster.
as_embedded "$kernels/gemm_sm90a.hip" gemm_sm90a
family=
i=0
while read -r ta tc tra trb epi kind bn stages split; do
  cp "$tmp/gemm_sm90a.cu" "$tmp/family$i.cu"
  compile "family$i" -DTJ_TA=$ta -DTJ_TC=$tc -DTJ_TRANS_A=$tra \
    -DTJ_TRANS_B=$trb -DTJ_EPI=$epi -DTJ_H_KIND=$kind -DTJ_H_BN=$bn \
    -DTJ_H_STAGES=$stages -DTJ_H_SPLIT=$split -DTJ_GEMM_ENTRY=family$i \
    -DTJ_REDUCE_ENTRY=family${i}_reduce -DTJ_COLSUM_ENTRY=family${i}_colsum \
    -DTJ_PAD_ENTRY=family${i}_pad
  family="$family family$i family${i}_pad"
  [ "$kind" = 4 ] && family="$family family${i}_reduce"
  [ "$epi" = 3 ] && family="$family family${i}_colsum"
  i=$((i + 1))
done <<EOF
1 1 0 0 0 0 256 4 1
1 1 0 0 0 0 128 5 1
1 1 0 0 0 0 64 8 1
1 1 0 0 0 1 256 4 1
1 1 0 0 0 1 128 5 1
1 1 0 0 0 2 256 4 1
1 1 0 0 0 3 64 8 1
1 1 0 0 0 4 128 5 1
1 1 0 0 0 5 128 5 1
1 1 0 0 0 5 128 5 2
1 1 0 0 0 5 128 5 3
1 1 0 0 0 5 128 5 4
1 1 0 0 0 5 128 5 8
1 1 0 0 0 5 256 4 1
1 1 0 0 0 5 256 4 2
1 1 0 0 0 5 256 4 3
1 1 0 0 0 5 256 4 4
2 2 0 0 0 0 128 5 1
2 2 1 0 2 1 256 4 1
1 3 1 1 1 2 256 4 1
2 2 0 1 3 3 64 8 1
1 2 1 0 3 4 128 5 1
2 3 1 1 2 0 64 8 1
2 2 0 1 2 5 128 5 3
1 3 0 0 3 5 256 5 1
EOF
# The grouped GEMM's Hopper configurations (gemm_grouped_sm90a.hip):
# M-grouped (TJ_GROUPED 1), every layout and epilogue in bf16 at BN 128,
# and f16 to f16 and f32 at BN 256 and 64; K-grouped (2, A stored K x M,
# B K x N), bf16 to bf16 and f32 and f16 to f16 at each BN; entries
# grouped<i>, with _colsum (dGELU).
as_embedded "$kernels/gemm_grouped_sm90a.hip" gemm_grouped_sm90a
i=0
grouped_config() {
  cp "$tmp/gemm_grouped_sm90a.cu" "$tmp/grouped$i.cu"
  compile "grouped$i" -DTJ_GROUPED=$1 -DTJ_TA=$2 -DTJ_TC=$3 \
    -DTJ_TRANS_A=$4 -DTJ_TRANS_B=$5 -DTJ_EPI=$6 -DTJ_H_BN=$7 \
    -DTJ_H_STAGES=$8 -DTJ_GGEMM_ENTRY=grouped$i \
    -DTJ_GCOLSUM_ENTRY=grouped${i}_colsum
  family="$family grouped$i"
  [ "$6" = 3 ] && family="$family grouped${i}_colsum"
  i=$((i + 1))
}
for layout in "0 0" "0 1" "1 0" "1 1"; do
  for epi in 0 1 2 3; do
    grouped_config 1 2 2 $layout $epi 128 5
  done
done
grouped_config 1 1 1 0 0 2 256 4
grouped_config 1 1 3 0 1 3 64 8
grouped_config 2 2 2 1 0 0 128 5
grouped_config 2 2 3 1 0 0 256 4
grouped_config 2 1 1 1 0 0 64 8
entries=$family
# One line per function: name, registers, stack, spill stores, spill loads.
awk '
  /Compiling entry function/ { split($0, q, "'\''"); fn = q[2] }
  /bytes stack frame/ { stack[fn] = $1; stores[fn] = $5; loads[fn] = $9 }
  /Used [0-9]+ registers/ { for (i = 1; i <= NF; i++) if ($i == "Used") regs[fn] = $(i + 1) }
  END { for (f in regs) print f, regs[f], stack[f] + 0, stores[f] + 0, loads[f] + 0 }
' "$tmp/log" >"$tmp/table"
# One line per function of the PTX: name, wgmma.mma_async and mma.sync
# instructions.
awk '
  /\.entry / { fn = $0; sub(/.*\.entry /, "", fn); sub(/\(.*/, "", fn); seen[fn] = 1 }
  /wgmma\.mma_async/ { w[fn]++ }
  /[^g]mma\.sync/ { m[fn]++ }
  END { for (f in seen) print f, w[f] + 0, m[f] + 0 }
' "$tmp/g.ptx" >"$tmp/mma"
# ptxas's notes of lost performance name no function on some versions:
# any one fails the file.
if grep -qi 'performance loss\|warning' "$tmp/log"; then
  fail "ptxas reported:"
  grep -i 'performance loss\|warning' "$tmp/log" | sed 's/^/  /'
fi
for e in $entries; do
  line=$(awk -v e="$e" '$1 == e' "$tmp/table")
  if [ -z "$line" ]; then fail "$e: not in ptxas's report"; continue; fi
  set -- $line
  echo "$e (sm_90a): $2 registers, $3 bytes stack, $4 bytes spill stores, $5 bytes spill loads"
  [ "$3" -eq 0 ] && [ "$4" -eq 0 ] && [ "$5" -eq 0 ] ||
    fail "$e: a stack frame or spills ($3, $4, $5 bytes)"
  case $e in *_reduce | *_colsum | *_pad) continue ;; esac
  set -- $(awk -v e="$e" '$1 == e { print $2, $3 }' "$tmp/mma") x x
  [ "$1" != x ] && [ "$1" -gt 0 ] && [ "$2" -eq 0 ] ||
    fail "$e: $1 wgmma.mma_async, $2 mma.sync in its PTX; wanted wgmma only"
done
[ "$failures" -eq 0 ]
