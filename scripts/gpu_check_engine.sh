#!/usr/bin/env bash
# Runs the engine's CUDA tests, then the GPU benchmark (issue 3 item 8: engine FP16 vs PyTorch), on
# a GPU machine from a build made elsewhere (the GPU machines lack the absl/protobuf/onnx/grpc
# development files, so nothing is built there). docs/engine-cuda.md has the exact invocation.
#
#   On the build machine (CUDA toolkit, TESSERA_CUDA=ON build of the engine tests and
#   tessera-engine-bench):
#     scripts/gpu_check_engine.sh bundle [BUILD_DIR]      # default BUILD_DIR: build-cuda
#   packs the engine_cuda_* and executor_cuda_* test binaries and tessera-engine-bench (debug info stripped), the
#   data-plane binaries when the build has them (tessera-executor, -gpulet-bench, -server, -bench),
#   the non-CUDA shared libraries they need and the ONNX node tests (for
#   engine_cuda_conformance_test) and the small models of a zoo (those of at most 4 MiB from
#   $TESSERA_GPU_ZOO, default BUILD_DIR/zoo: the CI set made by ctest) into BUILD_DIR/gpu-bundle,
#   packed as BUILD_DIR/gpu-bundle.tar.xz;
#   fails when that and the repository's files exceed 64 MiB (the device tool's carry limit counts
#   both). Carry the .tar.xz to the GPU
#   machine at the same place in the repository; the scripts there unpack it.
#
#   On the GPU machine, from the repository root:
#     scripts/gpu_check_engine.sh [--no-bench] [BUILD_DIR]
#   prints the GPU, checks that every shared library resolves (cuBLAS 13 / cuDNN 9 come from the
#   CUDA toolkit or the Python venv's nvidia/* wheels), runs every engine_cuda_* and executor_cuda_* test binary (each
#   under `timeout`, TESSERA_GPU_TEST_TIMEOUT s, default 240), engine_zoo_test on the bundled
#   zoo with the CUDA backend in FP32 and FP16, and prints a summary; then, whatever
#   the tests did, runs bench/gpu/engine_vs_torch.py with a python3 that has torch (extra
#   arguments in TESSERA_GPU_BENCH_ARGS). Logs and engine_vs_torch.md go to
#   $TESSERA_GPU_LOG_DIR (default $OUT/tessera-gpu-check, else /tmp/tessera-gpu-check).
#   Exit status: 0 when every test passed and the benchmark ran and met its target; 1 on a test
#   failure, a skip for want of a GPU (on a GPU machine the device was not usable), or a
#   benchmark that failed or missed its target (both parts always run; the summary says which).
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/gpu_env.sh
source "$REPO/scripts/gpu_env.sh"
MODE=run
if [[ "${1:-}" == bundle ]]; then
  MODE=bundle
  shift
fi
BUILD="${1:-build-cuda}"
[[ "$BUILD" = /* ]] || BUILD="$REPO/$BUILD"
BUNDLE="$BUILD/gpu-bundle"

if [[ "$MODE" == bundle ]]; then
  set -e
  rm -rf "$BUNDLE"
  mkdir -p "$BUNDLE/bin" "$BUNDLE/lib"
  shopt -s nullglob
  tests=("$BUILD"/bin/engine_cuda_* "$BUILD"/bin/executor_cuda_*)
  [[ ${#tests[@]} -gt 0 ]] || { echo "no engine_cuda_* binaries in $BUILD/bin" >&2; exit 1; }
  [[ -x "$BUILD/bin/tessera-engine-bench" ]] || {
    echo "no tessera-engine-bench in $BUILD/bin (configure with -DTESSERA_BUILD_BENCH=ON)" >&2
    exit 1
  }
  # The data plane's binaries and the server too, when this build has them
  # (bench/gpu/gpulet_isolation.sh, bench/perf_analyzer_compat.sh).
  extra=()
  # engine_zoo_test too: with TESSERA_ZOO_BACKEND=cuda it checks a zoo on the GPU (docs/model-zoo.md).
  for b in tessera-executor tessera-gpulet-bench tessera-server tessera-bench tessera-bare-server \
           engine_zoo_test; do
    [[ -x "$BUILD/bin/$b" ]] && extra+=("$BUILD/bin/$b")
  done
  for t in "${tests[@]}" "$BUILD/bin/tessera-engine-bench" "${extra[@]}"; do
    objcopy --strip-debug "$t" "$BUNDLE/bin/$(basename "$t")"
    # Every resolved library except the CUDA ones (the GPU machine has its own) and glibc's.
    ldd "$t" | awk '/=> \// {print $3}' | while read -r lib; do
      case "$(basename "$lib")" in
        libcuda.so*|libcudart*|libcublas*|libcudnn*|libc.so*|libm.so*|libdl.so*|librt.so*|\
        libpthread.so*|ld-linux*|libgcc_s*) ;;
        *) cp -Lu "$lib" "$BUNDLE/lib/" ;;
      esac
    done
  done
  # The ONNX node tests for engine_cuda_conformance_test (Debian's libonnx-testdata; 4 MiB packed).
  if [[ -d /usr/share/libonnx-testdata/data/node ]]; then
    cp -r /usr/share/libonnx-testdata/data/node "$BUNDLE/onnx-node-tests"
  else
    echo "no /usr/share/libonnx-testdata: the CUDA conformance test will skip (apt-get install libonnx-testdata)" >&2
  fi
  # Small zoo models, for engine_zoo_test on the CUDA backend (the tiny transformers and unet
  # exercise the integer, Split and image ops); the large ones would not fit the carry limit.
  zoo="${TESSERA_GPU_ZOO:-$BUILD/zoo}"
  for model in "$zoo"/*/; do
    [[ -f "$model/1/model.onnx" && $(du -sk "$model" | cut -f1) -le 4096 ]] || continue
    mkdir -p "$BUNDLE/zoo"
    cp -r "$model" "$BUNDLE/zoo/"
  done
  [[ -d "$BUNDLE/zoo" ]] || echo "no zoo models under $zoo: the CUDA zoo check will not run" >&2
  du -sh "$BUNDLE"
  ls "$BUNDLE/bin" "$BUNDLE/lib"
  # Carried compressed: the folder (oneDNN alone is ~38 MiB) is over the device tool's limit.
  # xz: half gzip's size (35 against 63 MiB with the HTTP endpoint's gnutls), which leaves room
  # under the limit for the repository the device tool carries too.
  tar -cf - -C "$BUILD" gpu-bundle | xz -T0 -6 >"$BUILD/gpu-bundle.tar.xz"
  kib=$(du -sk "$BUILD/gpu-bundle.tar.xz" | cut -f1)
  tree_kib=$(( $(git -C "$REPO" ls-files -z | (cd "$REPO" && xargs -0 du -cb 2>/dev/null) |
                 tail -1 | cut -f1) / 1024 ))
  echo "$BUILD/gpu-bundle.tar.xz: $((kib / 1024)) MiB, with the repository's" \
       "$((tree_kib / 1024)) MiB (carry it; the scripts unpack it)"
  kib=$((kib + tree_kib))
  if [[ $kib -gt 65536 ]]; then
    echo "the bundle and the repository are $((kib / 1024)) MiB, over the device tool's 64 MiB carry limit" >&2
    exit 1
  fi
  exit 0
fi

BENCH=1
if [[ "${1:-}" == --no-bench ]]; then
  BENCH=0
  shift
  BUILD="${1:-build-cuda}"
  [[ "$BUILD" = /* ]] || BUILD="$REPO/$BUILD"
  BUNDLE="$BUILD/gpu-bundle"
fi

tessera_gpu_unpack "$BUILD"
BIN="$BUNDLE/bin"
[[ -d "$BIN" ]] || BIN="$BUILD/bin"  # a build made on this machine
shopt -s nullglob
tests=("$BIN"/engine_cuda_* "$BIN"/executor_cuda_*)
if [[ ${#tests[@]} -eq 0 ]]; then
  echo "no engine_cuda_* test binaries under $BUNDLE/bin or $BUILD/bin" >&2
  exit 1
fi

echo "== GPU"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || true

TESSERA_REPO="$REPO" tessera_gpu_libpath "$BUNDLE"
[[ -d "$BUNDLE/onnx-node-tests" ]] && export TESSERA_ONNX_NODE_TESTS="$BUNDLE/onnx-node-tests"
export TESSERA_SOURCE_DIR="$REPO"

echo "== shared libraries"
missing=0
for t in "${tests[@]}"; do
  if ldd "$t" | grep -q "not found"; then
    echo "$(basename "$t") cannot resolve:"
    ldd "$t" | grep "not found"
    missing=1
  fi
done
ldd "${tests[0]}" | grep -E "cublas|cudnn" || true
if [[ $missing -ne 0 ]]; then
  echo "missing libraries: the build links libcublas.so.13/libcudnn.so.9 (CUDA 13); see docs/engine-cuda.md" >&2
  exit 1
fi

# Full logs go to $TESSERA_GPU_LOG_DIR (default /tmp/tessera-gpu-check; $OUT/ on the device tool);
# the terminal gets failures, skip reasons and a summary.
LOGS="${TESSERA_GPU_LOG_DIR:-${OUT:-/tmp}/tessera-gpu-check}"
mkdir -p "$LOGS"
status=0
declare -a summary
for t in "${tests[@]}"; do
  name=$(basename "$t")
  log="$LOGS/$name.log"
  echo "== $name (log: $log)"
  # -k: a process stuck in the CUDA driver may not end on SIGTERM, and the call would hang.
  timeout -k 10 "${TESSERA_GPU_TEST_TIMEOUT:-240}" "$t" --gtest_color=no >"$log" 2>&1
  rc=$?
  [[ $rc -eq 124 || $rc -eq 137 ]] && echo "$name: timed out after ${TESSERA_GPU_TEST_TIMEOUT:-240} s"
  grep -E '^\[  FAILED  \]|Failure$|^[^[].*(Expected|Value of|Which is|expected|differ)' "$log" | head -60
  passed=$(grep -oP '^\[  PASSED  \] \K[0-9]+' "$log" | tail -1)
  skipped=$(grep -oP '^\[  SKIPPED \] \K[0-9]+(?= test)' "$log" | tail -1)
  failed=$(grep -oP '^\[  FAILED  \] \K[0-9]+(?= test)' "$log" | tail -1)
  no_gpu=$(grep -c "no CUDA device on this machine" "$log")
  # Skips for another reason (e.g. the CPU reference of this build lacks an op) are listed.
  grep -A1 ": Skipped$" "$log" | grep -vE ": Skipped$|no CUDA device|^--$" | sort | uniq -c | head -20
  summary+=("$name: rc=$rc passed=${passed:-0} failed=${failed:-0} skipped=${skipped:-0} (no GPU: $no_gpu)")
  [[ $rc -eq 0 && $no_gpu -eq 0 ]] || status=1
done

# The zoo on the CUDA backend (docs/model-zoo.md): each model against onnxruntime's reference.
if [[ -d "$BUNDLE/zoo" && -x "$BIN/engine_zoo_test" ]]; then
  for precision in fp32 fp16; do
    log="$LOGS/engine_zoo_test-cuda-$precision.log"
    echo "== engine_zoo_test, CUDA $precision, on $(ls "$BUNDLE/zoo" | tr '\n' ' ')(log: $log)"
    TESSERA_ZOO_DIR="$BUNDLE/zoo" TESSERA_ZOO_BACKEND=cuda TESSERA_ZOO_PRECISION=$precision \
      timeout -k 10 "${TESSERA_GPU_TEST_TIMEOUT:-240}" "$BIN/engine_zoo_test" --gtest_color=no \
      >"$log" 2>&1
    rc=$?
    grep -E '^\[ zoo|^\[  FAILED  \]|Failure$' "$log" | head -40
    passed=$(grep -oP '^\[  PASSED  \] \K[0-9]+' "$log" | tail -1)
    failed=$(grep -oP '^\[  FAILED  \] \K[0-9]+(?= test)' "$log" | tail -1)
    summary+=("engine_zoo_test cuda-$precision: rc=$rc passed=${passed:-0} failed=${failed:-0}")
    [[ $rc -eq 0 ]] || status=1
  done
fi

# The benchmark. Python runs with the machine's own library path (the bundle's libstdc++ must not
# replace the one torch was built against); only the engine binary gets the bundle's, through a
# wrapper script.
bench_status=skipped
if [[ $BENCH -eq 1 ]]; then
  echo "== benchmark: engine FP16 vs PyTorch (log: $LOGS/engine_vs_torch.log)"
  py=""
  for cand in /usr/bin/python3 python3 "$REPO/.venv/bin/python"; do
    if LD_LIBRARY_PATH="$ORIG_LD_LIBRARY_PATH" "$cand" -c 'import torch, onnx' 2>/dev/null; then
      py="$cand"
      break
    fi
  done
  if [[ ! -x "$BIN/tessera-engine-bench" ]]; then
    echo "no tessera-engine-bench in $BIN (re-run the bundle step)"
    bench_status="not run (no tessera-engine-bench)"
  elif [[ -z "$py" ]]; then
    echo "no python3 with torch and onnx on this machine"
    bench_status="not run (no python with torch)"
  else
    wrapper="$LOGS/tessera-engine-bench.sh"
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%q exec %q "$@"\n' "$LD_LIBRARY_PATH" \
      "$BIN/tessera-engine-bench" >"$wrapper"
    chmod +x "$wrapper"
    # shellcheck disable=SC2086  # TESSERA_GPU_BENCH_ARGS is a list of arguments
    LD_LIBRARY_PATH="$ORIG_LD_LIBRARY_PATH" "$py" "$REPO/bench/gpu/engine_vs_torch.py" \
      --bench "$wrapper" --out "$LOGS/engine_vs_torch.md" ${TESSERA_GPU_BENCH_ARGS:-} \
      2>&1 | tee "$LOGS/engine_vs_torch.log" | grep -vE "Warning|warnings.warn"
    brc=${PIPESTATUS[0]}
    case $brc in
      0) bench_status="ran, every point met >= 1.0x eager" ;;
      3) bench_status="ran, some point missed >= 1.0x eager or failed (see the table's notes)" ;;
      *) bench_status="failed (exit $brc; see $LOGS/engine_vs_torch.log)" ;;
    esac
    [[ $brc -eq 0 ]] || status=1
  fi
fi

echo "== summary"
printf '%s\n' "${summary[@]}"
echo "benchmark: $bench_status"
exit $status
