#!/usr/bin/env bash
# THE test command: installs dependencies, configures and builds build/ (CMake + Ninja,
# RelWithDebInfo, ccache), then runs every CTest test (unit + integration) and exits non-zero on
# any failure. The last line printed is ctest's summary line.
#
# Environment:
#   TESSERA_CUDA=ON|OFF        build the CUDA backend (default ON; sm_90; needs nvcc, not a GPU)
#   TESSERA_BUILD_DIR=DIR      build directory (default <repo>/build)
#   CTEST_PARALLEL_LEVEL=N     parallel tests (default: number of cores)
#   TESSERA_CTEST_ARGS="..."   extra ctest arguments, e.g. "-L integration" or "-R engine"
# Tests labelled `gpu` are excluded when no NVIDIA GPU is visible (nvidia-smi -L).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${TESSERA_BUILD_DIR:-$REPO/build}"
CUDA="${TESSERA_CUDA:-ON}"
JOBS="$(nproc)"

"$REPO/scripts/install_deps.sh"

# nvcc sits in /usr/local/cuda/bin on these machines, which is not always on PATH (CI).
if [[ "$CUDA" == ON ]] && ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
# Let fresh clones at other paths (CI) hit the same ccache entries.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$REPO}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-true}"

# A build dir made with another generator cannot be reconfigured with Ninja: drop its cache.
if [[ -f "$BUILD_DIR/CMakeCache.txt" ]] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$BUILD_DIR/CMakeCache.txt"; then
  echo "[test] $BUILD_DIR was configured with another generator; reconfiguring with Ninja" >&2
  rm -rf "$BUILD_DIR/CMakeCache.txt" "$BUILD_DIR/CMakeFiles"
fi

cmake -S "$REPO" -B "$BUILD_DIR" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTESSERA_CUDA="$CUDA" \
  -DTESSERA_BUILD_TESTS=ON
cmake --build "$BUILD_DIR" -j "$JOBS"

CTEST_ARGS=(--test-dir "$BUILD_DIR" --output-on-failure --no-tests=error
            -j "${CTEST_PARALLEL_LEVEL:-$JOBS}")
if ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "[test] no NVIDIA GPU visible: excluding tests labelled gpu" >&2
  CTEST_ARGS+=(-LE gpu)
fi
# shellcheck disable=SC2206  # word splitting of the extra arguments is intended
CTEST_ARGS+=(${TESSERA_CTEST_ARGS:-})

LOG="$BUILD_DIR/ctest.log"
set +e
ctest "${CTEST_ARGS[@]}" 2>&1 | tee "$LOG"
rc=${PIPESTATUS[0]}
set -e

# Repeat the summary as the last line so that it is easy to find after long test output.
summary="$(grep -E '^[0-9]+% tests passed' "$LOG" | tail -n 1 || true)"
echo
if [[ -n "$summary" ]]; then
  echo "$summary"
else
  echo "ctest printed no summary line (exit code $rc)"
  ((rc != 0)) || rc=1
fi
exit "$rc"
