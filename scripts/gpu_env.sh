# Sourced by the scripts that run carried binaries on a GPU machine (scripts/gpu_check_engine.sh,
# bench/gpu/gpulet_isolation.sh). Defines:
#
#   tessera_gpu_unpack BUILD_DIR   extracts BUILD_DIR/gpu-bundle.tar.xz into BUILD_DIR when the
#                                  gpu-bundle folder is not there (the device tool carries the
#                                  compressed bundle: the folder is over its 64 MiB limit)
#   tessera_gpu_build REPO ARG BINARY
#                                  sets BUILD (ARG, default "build", relative to REPO) and BIN (the
#                                  unpacked bundle's bin/ when it has BINARY, else BUILD/bin)
#   tessera_free_port              prints a free TCP port on 127.0.0.1
#   tessera_gpu_libpath BUNDLE     sets ORIG_LD_LIBRARY_PATH (as it was) and exports LD_LIBRARY_PATH:
#                                  the bundle's lib/, then wherever cuBLAS 13 / cuDNN 9 are here (the
#                                  CUDA toolkit, or the nvidia/* wheels of a python's site-packages)

tessera_gpu_unpack() {
  local build="$1"
  if [[ ! -d "$build/gpu-bundle" && -f "$build/gpu-bundle.tar.xz" ]]; then
    echo "== unpacking $build/gpu-bundle.tar.xz"
    # Python's tarfile where tar has no xz to call.
    tar -xJf "$build/gpu-bundle.tar.xz" -C "$build" 2>/dev/null ||
      python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
        "$build/gpu-bundle.tar.xz" "$build"
  fi
}

tessera_gpu_build() {
  BUILD="${2:-build}"
  [[ "$BUILD" = /* ]] || BUILD="$1/$BUILD"
  tessera_gpu_unpack "$BUILD"
  BIN="$BUILD/gpu-bundle/bin"
  [[ -x "$BIN/$3" ]] || BIN="$BUILD/bin"
}

# With the machine's own library path (the bundle's libstdc++ is not python's).
tessera_free_port() {
  env LD_LIBRARY_PATH="${ORIG_LD_LIBRARY_PATH-${LD_LIBRARY_PATH:-}}" python3 -c \
    'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

tessera_gpu_libpath() {
  local bundle="$1" libpath dir py site s lib
  ORIG_LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}"
  libpath="$bundle/lib"
  for dir in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda-13*/lib64 \
             /usr/lib/x86_64-linux-gnu; do
    [[ -d "$dir" ]] && libpath="$libpath:$dir"
  done
  for py in "${TESSERA_REPO:-.}/.venv/bin/python" python3 /usr/bin/python3; do
    site=$("$py" -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null) || continue
    for s in $site; do
      for lib in "$s"/nvidia/*/lib "$s"/nvidia/cu13/lib; do
        [[ -d "$lib" ]] && libpath="$libpath:$lib"
      done
    done
  done
  export LD_LIBRARY_PATH="$libpath${ORIG_LD_LIBRARY_PATH:+:$ORIG_LD_LIBRARY_PATH}"
}

# Starts $BIN/tessera-server with config $1 on repository $2, logging to $3/server.log, on free
# gRPC and metrics ports, and waits (up to 90 s) until tessera-bench gets answers from mlp and
# small_cnn. Sets `server` (its pid), `grpc`, `metrics`, and `ready` (1 when it answered).
tessera_start_server() {
  grpc=$(tessera_free_port)
  metrics=$(tessera_free_port)
  "$BIN/tessera-server" --config "$1" --model-repository "$2" \
    --grpc-port "$grpc" --metrics-port "$metrics" --http-port -1 --model-control-mode none \
    >"$3/server.log" 2>&1 &
  server=$!
  ready=0
  for _ in $(seq 1 90); do
    kill -0 "$server" 2>/dev/null || break
    if "$BIN/tessera-bench" -u "127.0.0.1:$grpc" -m mlp -m small_cnn --concurrency-range 1 \
         --warmup-s 0 --duration-s 0.05 --progress off --fail-on-error >/dev/null 2>&1; then
      ready=1
      break
    fi
    sleep 1
  done
}

# After tessera_start_server: when it never answered, prints the end of $1/server.log. Then stops
# the server and prints its log lines matching the extended regex $2 (and every E/W line).
tessera_stop_server() {
  if [[ $ready -ne 1 ]]; then
    echo "the server did not get ready; last log lines:"
    tail -20 "$1/server.log"
  fi
  kill -TERM "$server" 2>/dev/null
  wait "$server" 2>/dev/null
  grep -hE "$2| [EW] \[" "$1/server.log" | head -20
}
