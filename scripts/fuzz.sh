#!/usr/bin/env bash
# Runs each libFuzzer target (built by scripts/test.sh into build-asan/) for CUVIL_FUZZ_RUNS inputs (seed 1) or $1
# seconds, whichever ends first, seeded from small valid inputs: ONNX node-suite models, printed IR, and .npy
# files. A crash leaves its input in out/fuzz/<target>/. For a longer campaign: CUVIL_FUZZ_RUNS=-1 scripts/fuzz.sh 600
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-60}
RUNS=${CUVIL_FUZZ_RUNS:-150000}
CORPUS=out/fuzz
mkdir -p "$CORPUS"/{onnx,ir,npy,cuv,c_api,kserve}
# Seeds: a few small node-suite models and their tensors.
for c in test_relu test_add_bcast test_if test_loop11 test_reshape_negative_dim test_conv_with_strides_padding \
         test_maxpool_2d_default test_lstm_defaults test_gemm_default_matrix_bias test_softmax_example test_scan9_sum \
         test_gather_0 test_top_k test_resize_upsample_scales_nearest; do
  d=build/onnx-node-tests/node/$c
  [[ -f $d/model.onnx ]] && cp "$d/model.onnx" "$CORPUS/onnx/$c.onnx"
done
/usr/bin/python3 - "$CORPUS/npy" <<'PY'
import sys, numpy as np
for i, a in enumerate([np.arange(6, dtype=np.float32).reshape(2, 3), np.asfortranarray(np.ones((2, 3), np.int64)),
                       np.array(True), np.zeros((0, 4), np.float16), np.arange(4, dtype='>i4')]):
    np.save(f"{sys.argv[1]}/seed{i}.npy", a)
PY
for m in "$CORPUS"/onnx/*.onnx; do
  build/bin/cuvil inspect "$m" --ir > "$CORPUS/ir/$(basename "$m" .onnx).cvir" 2>/dev/null || true
done
# Artifacts compiled from the same models (the loader's seeds).
for m in "$CORPUS"/onnx/*.onnx; do
  build/bin/cuvil compile "$m" -o "$CORPUS/cuv/$(basename "$m" .onnx).cuv" >/dev/null 2>&1 || true
done
# A convolution with constant weights: its artifact has a prepacked section, which also seeds read_prepacked alone.
/usr/bin/python3 - "$CORPUS/ir/conv_const.cvir" <<'PY'
import random, struct, sys
random.seed(1)
w = b"".join(struct.pack("<f", random.uniform(-1, 1)) for _ in range(8 * 4 * 3 * 3))
open(sys.argv[1], "w").write("graph @main(%x: f32[1, 4, 6, 6]) {\n  %w: f32[8, 4, 3, 3] = constant 0x" + w.hex() +
                             "\n  %y: f32[1, 8, 6, 6] = Conv(%x, %w) {pads = [1, 1, 1, 1]}\n  return %y\n}\n")
PY
build/bin/cuvil compile "$CORPUS/ir/conv_const.cvir" -o "$CORPUS/cuv/conv_const.cuv" >/dev/null 2>&1 || true
# A product with a constant 4 x 12 B over 16 rows: on AVX-512 its artifact has a gemm_panels section (B's 192
# bytes match the fuzz target's small weights index), which seeds read_gemm_panels alone.
/usr/bin/python3 - "$CORPUS/ir/matmul_const.cvir" <<'PY'
import random, struct, sys
random.seed(2)
w = b"".join(struct.pack("<f", random.uniform(-1, 1)) for _ in range(48))
open(sys.argv[1], "w").write("graph @main(%x: f32[16, 4]) {\n  %w: f32[4, 12] = constant 0x" + w.hex() +
                             "\n  %y: f32[16, 12] = MatMul(%x, %w)\n  return %y\n}\n")
PY
build/bin/cuvil compile "$CORPUS/ir/matmul_const.cvir" -o "$CORPUS/cuv/matmul_const.cuv" >/dev/null 2>&1 || true
/usr/bin/python3 - "$CORPUS/cuv" <<'PY'
import struct, sys
for model, kind_wanted, out in (("conv_const", 7, "prepacked_section"), ("matmul_const", 9, "gemm_panels_section")):
    try:
        b = open(f"{sys.argv[1]}/{model}.cuv", "rb").read()
    except OSError:
        continue
    for i in range(struct.unpack_from("<I", b, 32)[0]):
        kind, _, off, size = struct.unpack_from("<IIQQ", b, 64 + 64 * i)
        if kind == kind_wanted:  # 7 prepacked, 9 gemm_panels (artifact/format.h)
            open(f"{sys.argv[1]}/{out}", "wb").write(b[off:off + size])
PY
head -c 64 /dev/zero > "$CORPUS/c_api/zeros"
# KServe v2 request seeds (the first byte: whether a binary header length follows, see fuzz_kserve_request.cpp)
printf '%s' '0{"id":"1","inputs":[{"name":"x","shape":[2,4],"datatype":"FP32","data":[1,2,3,4,5,6,7,8]}],"outputs":[{"name":"x"}]}' \
  > "$CORPUS/kserve/json"
printf '%s' '0{"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32","data":[[1,2,3,4]]},{"name":"ids","shape":[3],"datatype":"INT64","data":[1,2,3]}],"parameters":{"binary_data_output":true}}' \
  > "$CORPUS/kserve/two"
run() {
  local target=$1 corpus=$2  # $3: read-only seed directory
  mkdir -p "$CORPUS/$target"
  rm -f "$CORPUS/$target"/{crash,timeout,leak,oom}-*  # artifacts of an earlier run
  echo "fuzzing $target for ${SECONDS_PER_TARGET}s"
  # A fixed seed and run count make the run repeatable (CI must not pass or fail by luck); the time is a cap.
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 build-asan/bin/$target -seed=1 -runs="$RUNS" \
    -max_total_time="$SECONDS_PER_TARGET" -max_len=65536 \
    -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$CORPUS/$target/" "$corpus" "$3" \
    2>&1 | grep -E "^(#[0-9]+ +DONE|stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY)|runtime error" || true
  if compgen -G "$CORPUS/$target/crash-*" >/dev/null || compgen -G "$CORPUS/$target/timeout-*" >/dev/null ||
     compgen -G "$CORPUS/$target/leak-*" >/dev/null || compgen -G "$CORPUS/$target/oom-*" >/dev/null; then
    echo "$target found a failing input in $CORPUS/$target"; return 1
  fi
}
status=0
# Past crashers (tests/fuzz/regressions/<kind>) seed each run too.
run fuzz_onnx_loader "$CORPUS/onnx" tests/fuzz/regressions/onnx || status=1
# Whole models mutated and run (fast and reference kernels), from the same seeds in a corpus of their own.
mkdir -p "$CORPUS/onnx_run" tests/fuzz/regressions/onnx_run
cp -n "$CORPUS"/onnx/*.onnx "$CORPUS/onnx_run/" 2>/dev/null || true
run fuzz_onnx_run "$CORPUS/onnx_run" tests/fuzz/regressions/onnx_run || status=1
run fuzz_ir_parser "$CORPUS/ir" tests/fuzz/regressions/ir || status=1
run fuzz_npy "$CORPUS/npy" tests/fuzz/regressions/npy || status=1
mkdir -p tests/fuzz/regressions/{cuv,c_api}
run fuzz_artifact "$CORPUS/cuv" tests/fuzz/regressions/cuv || status=1
run fuzz_c_api "$CORPUS/c_api" tests/fuzz/regressions/c_api || status=1
mkdir -p tests/fuzz/regressions/kserve
run fuzz_kserve_request "$CORPUS/kserve" tests/fuzz/regressions/kserve || status=1
exit $status
