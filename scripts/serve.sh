#!/usr/bin/env bash
# THE start command: installs dependencies, builds only the server binaries in build/ (the same
# build directory as scripts/test.sh), then runs
#   build/bin/tessera-server --config configs/server.yaml "$@"
# from the repository root. Extra arguments go to the server, e.g.
#   scripts/serve.sh --grpc-port 8001 --metrics-port 8002 --log-verbose 1
# Build output goes to stderr, as does the server's log.
#
# Environment: TESSERA_CUDA=ON|OFF (default ON), TESSERA_BUILD_DIR=DIR (default <repo>/build),
#   TESSERA_CONFIG=FILE (default configs/server.yaml).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${TESSERA_BUILD_DIR:-$REPO/build}"
CUDA="${TESSERA_CUDA:-ON}"

"$REPO/scripts/install_deps.sh" >&2

if [[ "$CUDA" == ON ]] && ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$REPO}"
export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-true}"

# Configure when the build dir is new, made by another generator, or TESSERA_CUDA was given;
# otherwise Ninja re-runs CMake by itself when a CMakeLists.txt changed.
if [[ ! -f "$BUILD_DIR/build.ninja" || -n "${TESSERA_CUDA:-}" ]] \
   || ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$BUILD_DIR/CMakeCache.txt" 2>/dev/null; then
  if [[ -f "$BUILD_DIR/CMakeCache.txt" ]] && ! grep -q '^CMAKE_GENERATOR:INTERNAL=Ninja$' "$BUILD_DIR/CMakeCache.txt"; then
    rm -rf "$BUILD_DIR/CMakeCache.txt" "$BUILD_DIR/CMakeFiles"
  fi
  cmake -S "$REPO" -B "$BUILD_DIR" -G Ninja \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSERA_CUDA="$CUDA" -DTESSERA_BUILD_TESTS=ON >&2
fi
cmake --build "$BUILD_DIR" -j "$(nproc)" --target tessera-server tessera-executor >&2

cd "$REPO"
exec "$BUILD_DIR/bin/tessera-server" --config "${TESSERA_CONFIG:-configs/server.yaml}" "$@"
