#!/bin/sh
# cli_gemm.sh: the GEMM family at the command line.  Every option of
# --run gemm and --warm gemm parsed and refused where it is wrong (exit 2
# with a message); --warm gemm compiling configurations into a real cache
# for the build's arch without a GPU (amd: gfx90a, the tensor-core path;
# nvidia: sm_90, the Hopper kernel, named _sm90a_), a second warm finding
# them cached; --run gemm refused without a GPU (exit 1, "no GPU", and
# with --json the report's keys and the error); --warm grouped_gemm for
# each direction, with its own options, and --run grouped_gemm refused
# without a GPU.  With a GPU, --run gemm and --run grouped_gemm run each
# layout, type, epilogue, direction and routing for real against the
# oracle.
# Exit 0 when all passed, 1 when any failed, 77 when the program is absent.
. "$(dirname "$0")/cli_prelude.sh"
cache=$tmp/cache/cache.db
TOKITAI_JIT_CACHE=$cache
export TOKITAI_JIT_CACHE
unset NO_COLOR

platform=$("$prog" --version | sed -n 's/^platform: //p')
case $platform in
  amd) arch=gfx90a path=_tc ;;
  nvidia) arch=sm_90 path=_sm90a_ ;;
  *) echo "$me: --version names no platform"; exit 99 ;;
esac

# ------------------------------------------------------------ help
run 0 --help
for opt in '--run gemm' '--warm gemm' '--run grouped_gemm' '--warm grouped_gemm' \
    --dtype --c-dtype --layout --epilogue --aux --bias-grad --grouped --groups \
    --routing; do
  out -- "$opt"
done

# ------------------------------------------------------------ usage errors
run 2 --run gemm --dtype f32
err "--dtype 'f32' is not f16 or bf16"
run 2 --run gemm --dtype fp16
err "--dtype 'fp16' is not f16 or bf16"
run 2 --run gemm --c-dtype f64
err "--c-dtype 'f64' is not f16, bf16 or f32"
run 2 --run gemm --layout nx
err "--layout 'nx' is not nn, nt, tn or tt"
run 2 --run gemm --layout NN
err "--layout 'NN' is not"
run 2 --run gemm --epilogue gelu
err "--epilogue 'gelu' is not none, bias, biasgelu or dgelu"
run 2 --run gemm --shape 64x64
err "--shape '64x64' is not MxNxK"
run 2 --run gemm --shape 0x64x64
err "'0' is not a whole number from 1 to"
run 2 --run gemm --shape 64x64x64x
err "is not MxNxK"
run 2 --run gemm --shape 8x8x8 --shape 16x16x16
err "--run gemm takes one --shape, not 2"
run 2 --run gemm --n 64
err "--run gemm takes --shape MxNxK, not --n"
run 2 --run gemm --aux
err "--aux applies only to --epilogue biasgelu"
run 2 --run gemm --epilogue dgelu --aux
err "--aux applies only to --epilogue biasgelu"
run 2 --run gemm --epilogue biasgelu --bias-grad
err "--bias-grad applies only to --epilogue dgelu"
run 2 --run add_i32 --dtype bf16
err "--dtype applies only to --run and --warm of gemm and grouped_gemm"
run 2 --run add_i32 --layout nt
err "--layout applies only to --run and --warm of gemm and grouped_gemm"
run 2 --warm --arch "$arch" add_i32 --epilogue bias
err "--epilogue applies only to --run and --warm of gemm and grouped_gemm"
run 2 --stats --aux
err "--aux applies only to --run and --warm of gemm and grouped_gemm"
run 2 --run add_i32 --shape 8x8x8
err "--shape applies only to --tune, --run gemm, --warm gemm and --warm grouped_gemm"
run 2 --warm --arch "$arch" gemm add_i32
err "--warm gemm takes no other kernel names"
run 2 --warm gemm --arch "$arch" -j 2
err "--jobs does not apply to --warm gemm"
run 2 --warm gemm --arch "$arch" --seed 3
err "--seed applies only to --run"
run 2 --run gemm --arch "$arch"
err "--arch applies only to --warm"
run 2 --warm gemm --arch "$arch" --json
err "--json does not apply to --warm"
[ ! -e "$cache" ] || fail "a usage error created $cache"

# ------------------------------------------------------------ --warm gemm
run 0 --warm gemm --arch "$arch" --dtype bf16 --layout nt \
  --epilogue biasgelu --aux --shape 128x256x64
out "^gemm_bf16_bf16_bf16_nt_biasgelu[a-z0-9_]*$path[a-z0-9_]* for $arch \(128x256x64\): [0-9.]+ (ms|s)\$"
name=$(sed 's/ .*//' "$tmp/out")
run 0 --warm gemm --arch "$arch" --dtype bf16 --layout nt \
  --epilogue biasgelu --aux --shape 128x256x64
out "^$name for $arch \(128x256x64\): already cached\$"
run 0 --list-cache
out "$name"
# Each type, layout and epilogue names its own configuration.
run 0 --warm gemm --arch "$arch" --dtype f16 --c-dtype f32 --layout tn \
  --epilogue dgelu --bias-grad --shape 7x9x5 --shape 33x17x65
out "^gemm_f16_f16_f32_tn_dgelu[a-z0-9_]* for $arch \(7x9x5\): "
out "^gemm_f16_f16_f32_tn_dgelu[a-z0-9_]* for $arch \(33x17x65\): "
run 0 --warm gemm --arch "$arch" --layout tt --epilogue bias -q
[ ! -s "$tmp/out" ] || fail "$last: --quiet printed $(cat "$tmp/out")"
# f16 nn without an epilogue is tj_gemm_f16's: off sm_90 its embedded
# kernel, compiled by name; on sm_90 the Hopper configuration, named as
# the family's.
run 0 --warm gemm --arch "$arch"
out "^gemm_f16[a-z0-9_]* for $arch \(512x512x512\): "
case $arch in
  sm_90*) out "^gemm_f16_f16_f16_nn_none_sm90a_" ;;
  *) no_out "_nn_none" ;;
esac
run 1 --warm gemm --arch gfx9999
err "gfx9999"
run 1 --warm gemm --arch "$arch" --shape 1073741824x1073741824x1073741824
err "1073741824"

# ------------------------------------------------------------ grouped
run 2 --warm grouped_gemm --arch "$arch" --grouped n
err "--grouped 'n' is not m or k"
run 2 --warm grouped_gemm --arch "$arch" --groups 0
err "--groups '0' is not a whole number from 1 to 65535"
run 2 --warm grouped_gemm --arch "$arch" --groups 65536
err "--groups '65536' is not a whole number from 1 to 65535"
run 2 --warm grouped_gemm --arch "$arch" --grouped k --epilogue bias
err "--grouped k takes --epilogue none only"
run 2 --warm gemm --arch "$arch" --groups 4
err "--groups applies only to --run grouped_gemm and --warm grouped_gemm"
run 2 --run gemm --grouped m
err "--grouped applies only to --run grouped_gemm and --warm grouped_gemm"
run 2 --run grouped_gemm --routing zipf
err "--routing 'zipf' is not uniform or skewed"
run 2 --warm grouped_gemm --arch "$arch" --routing skewed
err "--routing applies only to --run grouped_gemm"
run 2 --run gemm --routing skewed
err "--routing applies only to --run grouped_gemm"
run 2 --run grouped_gemm --shape 8x8x8 --shape 9x9x9
err "--run grouped_gemm takes one --shape, not 2"
run 2 --run grouped_gemm --grouped k --epilogue dgelu
err "--grouped k takes --epilogue none only"
run 2 --warm grouped_gemm gemm --arch "$arch"
err "--warm grouped_gemm takes no other kernel names"
run 0 --warm grouped_gemm --arch "$arch" --dtype bf16 --epilogue dgelu \
  --bias-grad --groups 64 --shape 4096x1024x512
out "^gemm_grouped_m_bf16_bf16_bf16_nn_dgelu_[a-z0-9_]* for $arch \(4096x1024x512\): [0-9.]+ (ms|s)\$"
run 0 --warm grouped_gemm --arch "$arch" --grouped k --layout tn --c-dtype f32
out "^gemm_grouped_k_f16_f16_f32_tn_none_[a-z0-9_]* for $arch \(512x512x512\): "
run 0 --warm grouped_gemm --arch "$arch" --grouped k --layout tn --c-dtype f32 \
  --groups 3
out ": already cached\$"
run 1 --warm grouped_gemm --arch "$arch" --groups 65535 \
  --shape 1073741824x1073741824x1073741824
err "too large to address"

# ------------------------------------------------------------ --run gemm
run 0 --info
if grep -q 'none visible' "$tmp/out"; then
  run 1 --run gemm --dtype bf16 --layout nt
  err 'cannot run gemm: no GPU'
  run 1 --run gemm --json
  out '"kernel": "gemm"'
  out '"error": "no GPU device available'
  out '"first_call_ms": null'
  run 1 --warm gemm
  err 'no GPU'
  err '--arch'
  run 1 --run grouped_gemm --routing skewed --groups 16
  err 'cannot run grouped_gemm: no GPU'
  run 1 --run grouped_gemm --grouped k --json
  out '"kernel": "grouped_gemm"'
  out '"error": "no GPU device available'
else
  echo "note: a GPU is visible; --run gemm is checked for real"
  for layout in nn nt tn tt; do
    run 0 --run gemm --dtype bf16 --layout "$layout" --shape 129x257x67
    out "gemm_bf16_bf16_bf16_${layout}_none"
    out 'within_tolerance \| yes'
    out 'first_call_ms \| [0-9]'
  done
  for e in "bias" "biasgelu --aux" "dgelu --bias-grad" "dgelu"; do
    # shellcheck disable=SC2086
    run 0 --run gemm --dtype f16 --c-dtype f32 --layout nt --epilogue $e \
      --shape 64x96x80
  done
  run 0 --run gemm --dtype bf16 --c-dtype f16 --shape 1x1x1
  run 0 --run gemm --json --dtype bf16 --epilogue biasgelu --aux
  out '"error": null'
  out '"ran": "gemm_bf16_bf16_bf16_nn_biasgelu'
  for routing in uniform skewed; do
    run 0 --run grouped_gemm --routing "$routing" --groups 8 --dtype bf16 \
      --layout nt --epilogue dgelu --bias-grad --shape 300x96x72
    out 'gemm_grouped_m_bf16_bf16_bf16_nt_dgelu'
    out 'within_tolerance \| yes'
    run 0 --run grouped_gemm --routing "$routing" --groups 5 --grouped k \
      --layout tn --c-dtype f32 --shape 40x48x333
    out 'gemm_grouped_k_f16_f16_f32_tn_none'
  done
  run 0 --run grouped_gemm --groups 64 --epilogue biasgelu --aux --shape 17x33x9
fi

finish
