#!/bin/bash
# run-gpu.sh: build, test and measure on a GPU machine in one go, from a
# `make dist` tarball in the repository root plus the Debian -dev packages
# in .device/ (see ../shared/device/README.md).  Logs go to $OUT (or ./out).
#   bash bench/run-gpu.sh [MODE...]   MODE: check bench all gemm-check
#   family-check family-bench family-torch tuning-check gemm-bench gemm-default gemm-tune skinny-cost hopper-check
#   skinny-check tiles-bench tiles-smoke read-floor skinny-bench
#   skinny-graph skinny-pair tree-pair start-bench grouped-check
#   grouped-bench moe-check moe-bench first-call (default all); several
#   modes share one build and run in the order given, each to its end
#   even where one before failed.
# The GEMM modes, each well inside a device call: gemm-check, the GPU
# suite's gemm, verify, skinny and family cases and the tuning suite on
# the GPU; family-check, its family case (tj_gemm's configurations) and
# the tuning suite;
# hopper-check, its hopper case (the tiles; long enough to want a call
# of its own) and the
# tuning suite; skinny-check, its skinny case
# (the Hopper skinny kernel: shapes, evict-first, the early start) and
# the tuning suite; tuning-check, the tuning suite alone;
# gemm-bench, tj-bench's GEMM section on its eighteen default shapes,
# first without the variants (so that a variant that fails loses nothing
# else), then with them timed beside the default (TJ_GEMM_TMA_STORE=0,
# TJ_GEMM_EVICT_FIRST=0); gemm-default, its first
# half alone; gemm-tune, tokitai-jit
# --tune for the nine shapes with M >= 128 into a new cache (every
# configuration, each checked against the rule's choice before it is
# timed), then tj-bench's GEMM section running
# those decisions; skinny-cost, the Hopper skinny kernel's fixed cost
# at each forced strip width and cluster size (skinny_cost below);
# tiles-bench, tj-bench's GEMM section with its variants on the nine
# shapes with M >= 128; read-floor, what a kernel that only reads reaches
# in one launch (an empty launch, reads of 1 MiB to 256 MiB in nine
# shapes of grid), beside 1 x 4096 x 64 and 1 x 4096 x 4096;
# skinny-bench, tj-bench's GEMM section on the nine skinny shapes alone;
# skinny-graph, each strip width and cluster size forced, one launch at a
# time, in a row and in a graph, at 1 and 16 x 4096 x 4096 and 1 x 4096 x
# 11008; skinny-pair, the rule against TJ_PAIR_TILE and TJ_PAIR_SPLIT
# forced (256 and 3 unless set), alternated twice at the nine skinny
# shapes or TJ_PAIR_SHAPES (into skinny-pair-$TJ_PAIR_TAG.txt if set);
# tree-pair, this tree against the `make dist` tarball of each other
# tree as .device/pair-NAME.tar.gz, alternated twice at the nine skinny
# shapes or $TJ_PAIR_SHAPES (into tree-pair.txt); start-bench, tj-bench's start
# section (each entry's cold compile); grouped-check, the GPU suite's
# grouped case (tj_grouped_gemm against its oracle) and the tuning suite;
# grouped-bench, tj-bench's grouped section (the four MoE shapes, each
# direction, uniform and skewed routing, against a loop of per-expert
# cuBLAS GEMMs); first-call, tj-bench's cold section (a GEMM's first call
# on a new node, with and without background builds, beside torch's).
# moe-check, the GPU suite's moe case (the MoE permutation against its
# oracle, a graph replay, tj_verify of each entry); moe-bench, tj-bench's
# moe section (each call against a device-to-device copy of the same
# bytes, in the same run).
# The check modes write each test's time to $out/check-CASE.xml (Check's
# XML log).
# The build stays in /tmp/tj/tokitai-jit-*/ for commands after this one in
# the same call; they need the library's dependencies on the loader's
# path first (`. .device/gpu-env.sh` from the repository root).
set -u
[ $# -gt 0 ] || set -- all
out=${OUT:-$PWD/out}
root=$PWD
mkdir -p "$out"
. .device/gpu-env.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > "$out/gpu.txt" 2>&1
rm -rf /tmp/tj && mkdir -p /tmp/tj && tar xzf tokitai-jit-*.tar.gz -C /tmp/tj
cd /tmp/tj/tokitai-jit-*/ || exit 1
status=0
( ./configure --with-hip-platform=nvidia --enable-bench > "$out/configure.log" 2>&1 &&
  make -j16 > "$out/make.log" 2>&1 ) || { tail -30 "$out/configure.log" "$out/make.log"; exit 1; }
# Built: the build's logs make room among the few files a call brings back.
rm -f "$out/configure.log" "$out/make.log"
NINE="--shape 1024x1024x1024 --shape 2048x2048x2048 --shape 4096x4096x4096
  --shape 8192x8192x8192 --shape 128x4096x4096 --shape 128x11008x4096
  --shape 128x4096x11008 --shape 4096x11008x4096 --shape 4096x4096x11008"
SKINNY=1x4096x4096,1x11008x4096,1x4096x11008,4x4096x4096,4x11008x4096,4x4096x11008,16x4096x4096,16x11008x4096,16x4096x11008

gemm_check() {  # $1: the check_kernels_gpu cases (none: only tuning)
  make -j16 tests/check_kernels_gpu tests/check_tuning_gpu > "$out/make-tests.log" 2>&1 || { tail -30 "$out/make-tests.log"; return 1; }
  rm -f "$out/make-tests.log"
  mkdir -p tests/tmp
  local st=0 log
  # A log per mode (check-gemm-verify-skinny.log, check-hopper.log, ...).
  log="$out/check-$(echo ${1:-tuning} | tr ' ' '-').log"
  {
    for c in $1; do
      echo "== check_kernels_gpu, case $c"
      CK_RUN_CASE=$c CK_VERBOSITY=normal TJ_TEST_TMPDIR=$PWD/tests/tmp \
        CK_XML_LOG_FILE_NAME="$out/check-$c.xml" \
        timeout 560 ./tests/check_kernels_gpu || st=1
    done
    echo "== check_tuning_gpu"
    CK_VERBOSITY=normal TJ_TEST_TMPDIR=$PWD/tests/tmp \
      CK_XML_LOG_FILE_NAME="$out/check-tuning.xml" \
      timeout 300 ./tests/check_tuning_gpu || st=1
  } > "$log" 2>&1
  grep -E '^[0-9]+%: Checks|^== ' "$log"
  return $st
}

gemm_tune() {
  local st=0
  # $NINE unquoted: one word each.
  TOKITAI_JIT_CACHE=/tmp/tj/tune-cache.db timeout 300 \
    ./tokitai-jit --tune gemm_f16 $NINE > "$out/tune.txt" 2>&1 || st=1
  TOKITAI_JIT_CACHE=/tmp/tj/tune-cache.db ./tokitai-jit --list-tuning --json \
    > "$out/tuning.json" 2>&1 || st=1
  TJ_BENCH_VARIANTS=0 TJ_BENCH_CACHE=/tmp/tj/tune-cache.db timeout 240 \
    ./bench/tj-bench --only gemm > "$out/bench-gemm-tuned.txt" 2>&1 || st=1
  return $st
}

gemm_default() {
  # Its eighteen default shapes.
  TJ_BENCH_VARIANTS=0 timeout 200 ./bench/tj-bench --only gemm > "$out/bench-gemm-default.txt" 2>&1
}

gemm_bench() {
  local st=0
  gemm_default || st=1
  timeout 300 ./bench/tj-bench --only gemm > "$out/bench-gemm-variants.txt" 2>&1 || st=1
  return $st
}

# One run of a pair (skinny-pair, tree-pair): the tj-bench of tree $1 at
# the nine skinny shapes or $TJ_PAIR_SHAPES, with the assignments after
# it in its environment, its lines that the pair's tables take.
pair_run() {
  local tree=$1
  shift
  (cd "$tree" && env TJ_BENCH_VARIANTS=0 \
     TJ_BENCH_SHAPES=${TJ_PAIR_SHAPES:-$SKINNY} "$@" timeout 120 \
     ./bench/tj-bench --only gemm 2>&1) |
    grep -E 'copy, 256|runs|copy, clean L2 \(|layers in a (row|graph)'
}

# Every skinny strip width and cluster size forced in turn at the shapes
# $1 (comma-separated), tj-bench's lines that match $2.
each_skinny_config() {
  local st=0 w s
  for w in 256 128; do
    for s in 1 2 3 4 8; do
      [ $w = 256 ] && [ $s = 8 ] && continue  # no 256-column cluster of 8
      echo "== TJ_GEMM_SM90A_TILE=$w TJ_GEMM_SPLITK=$s"
      TJ_BENCH_VARIANTS=0 TJ_BENCH_SHAPES=$1 TJ_GEMM_SM90A_TILE=$w \
        TJ_GEMM_SPLITK=$s timeout 60 ./bench/tj-bench --only gemm 2>&1 |
        grep -E "$2" || st=1
    done
  done
  return $st
}

skinny_cost() {
  # The Hopper skinny kernel's fixed cost, each strip width and cluster
  # size forced: one k-tile (1 x 4096 x 64) beside the 33 MB and 90 MB
  # shapes of the same N, against a copy of the same bytes and a kernel
  # that only reads B; then the rule's choice at the nine skinny shapes, and
  # ncu's view of the 33 MB one beside the read.
  local st=0
  each_skinny_config 1x4096x64,1x4096x4096,1x4096x11008 \
    'runs|clean L2|copy of|read of' > "$out/skinny-cost.txt" || st=1
  TJ_BENCH_VARIANTS=0 TJ_BENCH_SHAPES=$SKINNY timeout 120 \
    ./bench/tj-bench --only gemm > "$out/bench-skinny.txt" 2>&1 || st=1
  TJ_BENCH_VARIANTS=0 TJ_BENCH_SHAPES=1x4096x4096 timeout 180 \
    ncu --clock-control none --launch-count 16 \
    --kernel-name regex:'skinny|tj_bench_read' --metrics \
    gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__cycles_active.max,sm__cycles_active.avg,gpc__cycles_elapsed.max,launch__grid_size \
    ./bench/tj-bench --only gemm > "$out/ncu-skinny.txt" 2>&1 || st=1
  return $st
}

full() {  # $1: check, bench or all
  local st=0
  if [ "$1" != bench ]; then
    make -j16 check > "$out/check.log" 2>&1 || st=1
    cat tests/*.log > "$out/tests.log" 2>/dev/null
    grep -E '^(PASS|FAIL|SKIP|ERROR|XFAIL|XPASS):' "$out/check.log"
    grep -h -E '^[0-9]+%: Checks' tests/*.log
    [ $st = 0 ] || grep -h -B2 -A8 -E ':(F|E):' tests/*.log | head -80
  fi
  if [ "$1" != check ]; then
    nvcc -O3 -arch=sm_90 -o /tmp/tj/pilot_gelu_bwd bench/pilot_gelu_bwd.cu > "$out/pilot-build.log" 2>&1 ||
      echo "pilot build failed: $(tail -3 "$out/pilot-build.log")"
    local pilot=; [ -x /tmp/tj/pilot_gelu_bwd ] && pilot="--pilot /tmp/tj/pilot_gelu_bwd"
    # The tuning decisions the benchmark runs: made ahead of time for the
    # default shapes with M >= 128 (the Hopper kernel's), in the cache the
    # benchmark uses, and listed with their times.
    export TOKITAI_JIT_CACHE=/tmp/tj/bench-cache.db
    ./tokitai-jit --tune gemm_f16 $NINE > "$out/tune.txt" 2>&1 || st=1
    ./tokitai-jit --list-tuning --json > "$out/tuning.json" 2>&1 || st=1
    TJ_BENCH_CACHE=$TOKITAI_JIT_CACHE ./bench/tj-bench --json "$out/bench.json" $pilot 2>&1 |
      tee "$out/bench.txt" || st=1
    unset TOKITAI_JIT_CACHE
  fi
  return $st
}

for what in "$@"; do
  echo "== $what ($(date +%T))"
  case $what in
    gemm-check) gemm_check "gemm verify skinny family" || status=1 ;;
    family-bench)  # tj_gemm's bf16 configurations against cuBLAS, and
                   # each one's first build
      timeout 300 ./bench/tj-bench --only family > "$out/bench-family.txt" 2>&1 ||
        status=1 ;;
    family-check) gemm_check "family" || status=1 ;;
    family-torch)  # tj_gemm against PyTorch on the same inputs
                   # (bench/family_torch.py: layouts, sweep, epilogues,
                   # accuracy; grouped, tj_grouped_gemm against
                   # torch._grouped_mm, when asked); TJ_FAMILY_ONLY picks
                   # its sections
      timeout ${TJ_FAMILY_TIMEOUT:-560} python3 "$root/bench/family_torch.py" \
        --lib "$PWD/.libs/libtokitai-jit.so" \
        ${TJ_FAMILY_ONLY:+--only "$TJ_FAMILY_ONLY"} \
        > "$out/family-torch.txt" 2>&1 || status=1
      tail -40 "$out/family-torch.txt" ;;
    grouped-check) gemm_check "grouped" || status=1 ;;
    grouped-bench)
      timeout 500 ./bench/tj-bench --only grouped \
        > "$out/bench-grouped.txt" 2>&1 ||
        status=1 ;;
    tuning-check) gemm_check "" || status=1 ;;
    skinny-cost) skinny_cost || status=1 ;;
    gemm-bench) gemm_bench || status=1 ;;
    gemm-default) gemm_default || status=1 ;;
    gemm-tune) gemm_tune || status=1 ;;
    hopper-check) gemm_check "hopper" || status=1 ;;
    skinny-check) gemm_check "skinny" || status=1 ;;
    tiles-smoke)  # the cluster-split tile forced, one shape each; a hang
                  # or a wrong result ends the run here
      for t in 64k2; do
        TJ_GEMM_SM90A_TILE=$t TJ_BENCH_VARIANTS=0 \
          TJ_BENCH_SHAPES=128x11008x4096,128x4096x4096 timeout 60 \
          ./bench/tj-bench --only gemm 2>&1 | grep -E 'runs|rel L2|TFLOP' ||
          { echo "tiles-smoke: $t failed"; exit 1; }
      done ;;
    first-call)  # each in a new process, every cache empty
      timeout 560 ./bench/tj-bench --only cold > "$out/bench-cold.txt" 2>&1 ||
        status=1 ;;
    start-bench)  # warm starts, and each entry's cold compile (new process,
                  # empty driver cache): the Hopper tiles' file against the
                  # skinny one's
      timeout 300 ./bench/tj-bench --only start > "$out/bench-start.txt" 2>&1 ||
        status=1 ;;
    read-floor)  # what a read reaches in one launch (bench_read_floor),
                 # beside one k-tile and the 33 MB skinny shape
      TJ_BENCH_READ_FLOOR=1 TJ_BENCH_VARIANTS=0 \
        TJ_BENCH_SHAPES=1x4096x64,1x4096x4096 timeout 120 \
        ./bench/tj-bench --only gemm > "$out/read-floor.txt" 2>&1 || status=1 ;;
    skinny-graph)
      # Each strip width and cluster size forced at the 33 MB shapes (and
      # one 90 MB), timed one launch at a time, as layers in a row and as
      # layers in a graph.
      each_skinny_config 1x4096x4096,16x4096x4096,1x4096x11008 \
        'copy, clean L2 \(|layers in a (row|graph)' \
        > "$out/skinny-graph.txt" || status=1 ;;
    skinny-pair)
      # The rule's choice against one configuration forced
      # ($TJ_PAIR_TILE, $TJ_PAIR_SPLIT: the rule's before), alternated
      # twice at the nine skinny shapes (or $TJ_PAIR_SHAPES).
      forced="TJ_GEMM_SM90A_TILE=${TJ_PAIR_TILE:-256} TJ_GEMM_SPLITK=${TJ_PAIR_SPLIT:-3}"
      for r in 1 2; do
        for how in rule "$forced"; do
          echo "== $how, run $r"
          # $forced unquoted: two assignments for env.
          pair_run . $([ "$how" = rule ] || echo "$forced") || status=1
        done
      done > "$out/skinny-pair${TJ_PAIR_TAG:+-$TJ_PAIR_TAG}.txt" ;;
    tree-pair)
      # $PWD's tree and each .device/pair-NAME.tar.gz, built in
      # /tmp/pair/NAME/, alternated.
      trees="this=$PWD"
      for t in "$root"/.device/pair-*.tar.gz; do
        [ -e "$t" ] || continue
        name=$(basename "$t" .tar.gz); name=${name#pair-}
        rm -rf "/tmp/pair/$name" && mkdir -p "/tmp/pair/$name" &&
          tar xzf "$t" -C "/tmp/pair/$name" &&
          (cd /tmp/pair/$name/tokitai-jit-*/ &&
           ./configure --with-hip-platform=nvidia --enable-bench > /dev/null 2>&1 &&
           make -j16 > /dev/null 2>&1) || { echo "tree-pair: $t did not build"; status=1; continue; }
        trees="$trees $name=$(echo /tmp/pair/$name/tokitai-jit-*/)"
      done
      for r in 1 2; do
        for tree in $trees; do
          echo "== ${tree%%=*}, run $r"
          pair_run "${tree#*=}" || status=1
        done
      done > "$out/tree-pair.txt" ;;
    skinny-bench)
      TJ_BENCH_VARIANTS=0 TJ_BENCH_SHAPES=$SKINNY timeout 120 \
        ./bench/tj-bench --only gemm > "$out/bench-skinny.txt" 2>&1 || status=1 ;;
    tiles-bench)
      TJ_BENCH_SHAPES=$(echo $NINE | sed 's/--shape //g; s/ /,/g') timeout 300 \
        ./bench/tj-bench --only gemm > "$out/bench-gemm-tiles.txt" 2>&1 || status=1 ;;
    moe-check)
      make -j16 tests/check_kernels_gpu > "$out/make-tests.log" 2>&1 ||
        { tail -30 "$out/make-tests.log"; status=1; continue; }
      rm -f "$out/make-tests.log"
      mkdir -p tests/tmp
      CK_RUN_CASE=moe CK_VERBOSITY=normal TJ_TEST_TMPDIR=$PWD/tests/tmp \
        CK_XML_LOG_FILE_NAME="$out/check-moe.xml" \
        timeout 560 ./tests/check_kernels_gpu > "$out/check-moe.log" 2>&1 ||
        status=1
      grep -E '^[0-9]+%: Checks' "$out/check-moe.log" ;;
    moe-bench)
      timeout 300 ./bench/tj-bench --only moe > "$out/bench-moe.txt" 2>&1 ||
        status=1 ;;
    check|bench|all) full "$what" || status=1 ;;
    *) echo "run-gpu.sh: unknown mode '$what'" >&2; status=1 ;;
  esac
done
echo "== done ($(date +%T))"
exit $status
