#!/usr/bin/env bash
# Runs the engine's CUDA tests on a GPU machine from a build made elsewhere (the GPU machines lack
# the absl/protobuf/onnx/grpc development files, so nothing is built there).
#
#   On the build machine (CUDA toolkit, TESSERA_CUDA=ON build of the engine tests):
#     scripts/gpu_check_engine.sh bundle [BUILD_DIR]      # default BUILD_DIR: build-cuda
#   packs the engine_cuda_* test binaries (debug info stripped) and the non-CUDA shared libraries
#   they need (protobuf, onnx_proto, absl, libstdc++) into BUILD_DIR/gpu-bundle (~12 MiB).
#   Carry BUILD_DIR/gpu-bundle to the GPU machine at the same place in the repository.
#
#   On the GPU machine, from the repository root:
#     scripts/gpu_check_engine.sh [BUILD_DIR]
#   prints the GPU, checks that every shared library resolves (cuBLAS 13 / cuDNN 9 come from the
#   CUDA toolkit or the Python venv's nvidia/* wheels), runs every engine_cuda_* test binary and
#   prints a summary. Exit status: 0 when every test passed; 1 on a failure, or when a test skipped
#   for want of a GPU (on a GPU machine that means the device was not usable).
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
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
  tests=("$BUILD"/bin/engine_cuda_*)
  [[ ${#tests[@]} -gt 0 ]] || { echo "no engine_cuda_* binaries in $BUILD/bin" >&2; exit 1; }
  for t in "${tests[@]}"; do
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
  du -sh "$BUNDLE"
  ls "$BUNDLE/bin" "$BUNDLE/lib"
  exit 0
fi

BIN="$BUNDLE/bin"
[[ -d "$BIN" ]] || BIN="$BUILD/bin"  # a build made on this machine
shopt -s nullglob
tests=("$BIN"/engine_cuda_*)
if [[ ${#tests[@]} -eq 0 ]]; then
  echo "no engine_cuda_* test binaries under $BUNDLE/bin or $BUILD/bin" >&2
  exit 1
fi

echo "== GPU"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || true

# Library path: the bundle, then wherever cuBLAS 13 and cuDNN 9 are on this machine.
libpath="$BUNDLE/lib"
for dir in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda-13*/lib64 \
           /usr/lib/x86_64-linux-gnu; do
  [[ -d "$dir" ]] && libpath="$libpath:$dir"
done
for py in "$REPO/.venv/bin/python" python3 /usr/bin/python3; do
  site=$("$py" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null) || continue
  for s in $site; do
    for lib in "$s"/nvidia/*/lib "$s"/nvidia/cu13/lib; do
      [[ -d "$lib" ]] && libpath="$libpath:$lib"
    done
  done
done
export LD_LIBRARY_PATH="$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
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
  "$t" --gtest_color=no >"$log" 2>&1
  rc=$?
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
echo "== summary"
printf '%s\n' "${summary[@]}"
exit $status
