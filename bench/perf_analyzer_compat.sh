#!/usr/bin/env bash
# Compatibility check: Triton's perf_analyzer drives tessera-server over gRPC and HTTP (KServe v2), and its
# figures sit next to tessera-bench's for the same closed-loop load. Writes the whole output, with
# date, machine, GPU and commit, to bench/results/<date>-perf-analyzer-<host>.txt.
#
# Where it runs: anywhere scripts/fetch_perf_analyzer.sh can make perf_analyzer run (it is called
# when no perf_analyzer is given): on Debian 12 the PyPI binary runs on Debian 13's C runtime put
# beside it; on the GPU machines (glibc >= 2.38, no pip, no network) carry the wheel in and pass it:
#
#   bench/perf_analyzer_compat.sh                      # here: fetches perf_analyzer once
#   # on a GPU machine, the wheel downloaded here beforehand (bench/gpu/wheels is git-ignored):
#   #   pip download perf-analyzer==2.60.0 --no-deps --only-binary=:all: \
#   #       --platform manylinux_2_38_x86_64 --python-version 3.12 -d bench/gpu/wheels
#   bench/perf_analyzer_compat.sh --build-dir build --wheel bench/gpu/wheels/perf_analyzer-*.whl
#   # or with a perf_analyzer binary already there:
#   PERF_ANALYZER=/path/to/perf_analyzer bench/perf_analyzer_compat.sh
#
# Options: --build-dir DIR (default build), --models "mlp small_cnn", --concurrency 1:4:1,
# --interval-ms 3000, --modes "sync async batch4 shm streaming http http-json http-shm" (http*: over
# the HTTP endpoint, binary tensors, JSON tensors of zeros, system shared memory), --output FILE. Exit 1 with a message
# saying what is missing when perf_analyzer or the binaries are not there.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="$REPO/build"
MODELS="mlp small_cnn"
CONCURRENCY="1:4:1"
INTERVAL_MS=3000
WHEEL=""
OUTPUT=""
MODES="sync async batch4 shm streaming http http-json http-shm"

die() { echo "perf_analyzer_compat: error: $*" >&2; exit 1; }

while (($#)); do
  case "$1" in
    --build-dir) BUILD_DIR="$2"; shift 2 ;;
    --models) MODELS="$2"; shift 2 ;;
    --concurrency) CONCURRENCY="$2"; shift 2 ;;
    --interval-ms) INTERVAL_MS="$2"; shift 2 ;;
    --wheel) WHEEL="$2"; shift 2 ;;
    --modes) MODES="$2"; shift 2 ;;
    --output) OUTPUT="$2"; shift 2 ;;
    -h|--help) sed -n '2,20p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done

glibc="$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')"

# ---- perf_analyzer -----------------------------------------------------------------------------------
WORK="$(mktemp -d /tmp/tessera-pa.XXXXXX)"
SERVER_PID=""
cleanup() {
  if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

PA="${PERF_ANALYZER:-}"
if [[ -z "$PA" && -n "$WHEEL" ]]; then
  [[ -f "$WHEEL" ]] || die "wheel $WHEEL not found"
  if command -v unzip >/dev/null 2>&1; then
    unzip -q "$WHEEL" -d "$WORK/wheel"
  else
    python3 -m zipfile -e "$WHEEL" "$WORK/wheel" || die "cannot unpack $WHEEL (no unzip, no python3)"
  fi
  PA="$(find "$WORK/wheel" -type f -name perf_analyzer -path '*bin*' | head -n1)"
  [[ -n "$PA" ]] || die "no bin/perf_analyzer inside $WHEEL (the 0.1.0 placeholder wheel? use 2.60.0)"
  chmod +x "$PA"
fi
if [[ -z "$PA" ]]; then
  PA="$(command -v perf_analyzer || true)"
fi
if [[ -z "$PA" ]]; then
  PA="$("$REPO/scripts/fetch_perf_analyzer.sh")" || die "scripts/fetch_perf_analyzer.sh failed"
fi
[[ -n "$PA" && -x "$PA" ]] || die "perf_analyzer not found: set PERF_ANALYZER=/path/to/perf_analyzer" \
  "or pass --wheel perf_analyzer-2.60.0-...whl (see the header of this script for how to get it)"
"$PA" --version >/dev/null 2>&1 || {
  "$PA" --version 2>&1 | tail -n 5 >&2 || true
  die "$PA does not start here (missing libraries? see above)"
}

# The binaries: a build made on this machine, or the bundle carried from the build machine
# (scripts/gpu_check_engine.sh bundle build -> build/gpu-bundle.tar.xz), whose libraries are put
# on the path of the Tessera binaries only: perf_analyzer and python3 keep the machine's own.
# shellcheck source=scripts/gpu_env.sh
source "$REPO/scripts/gpu_env.sh"
tessera_gpu_unpack "$BUILD_DIR"
BIN="$BUILD_DIR/bin"
TESSERA_LD="${LD_LIBRARY_PATH:-}"
if [[ ! -x "$BIN/tessera-server" && -x "$BUILD_DIR/gpu-bundle/bin/tessera-server" ]]; then
  BIN="$BUILD_DIR/gpu-bundle/bin"
  TESSERA_REPO="$REPO" tessera_gpu_libpath "$BUILD_DIR/gpu-bundle"
  TESSERA_LD="$LD_LIBRARY_PATH"
  export LD_LIBRARY_PATH="$ORIG_LD_LIBRARY_PATH"
fi
tessera() { LD_LIBRARY_PATH="$TESSERA_LD" "$@"; }
for bin in tessera-server tessera-executor tessera-bench; do
  [[ -x "$BIN/$bin" ]] || die "$BIN/$bin not found: build first (scripts/test.sh or cmake --build)"
done

# ---- server ----------------------------------------------------------------------------------------
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
GRPC_PORT="$(port)"
METRICS_PORT="$(port)"
HTTP_PORT="$(port)"
env LD_LIBRARY_PATH="$TESSERA_LD" "$BIN/tessera-server" --model-repository "$REPO/configs/models" --grpc-port "$GRPC_PORT" \
  --metrics-port "$METRICS_PORT" --http-port "$HTTP_PORT" --model-control-mode none --allow-client-shm \
  >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
URL="127.0.0.1:$GRPC_PORT"
for model in $MODELS; do
  ready=0
  for _ in $(seq 1 120); do
    kill -0 "$SERVER_PID" 2>/dev/null || { tail -n 40 "$WORK/server.log" >&2; die "tessera-server exited"; }
    if tessera "$BIN/tessera-bench" -u "$URL" -m "$model" --concurrency-range 1 --warmup-s 0 \
         --duration-s 0.05 --progress off --fail-on-error >/dev/null 2>&1; then
      ready=1; break
    fi
    sleep 0.5
  done
  ((ready)) || { tail -n 40 "$WORK/server.log" >&2; die "model $model not ready at $URL"; }
done

# ---- runs ------------------------------------------------------------------------------------------
HOST="$(hostname -s)"
DATE="$(date -u +%Y-%m-%d)"
OUTPUT="${OUTPUT:-$REPO/bench/results/$DATE-perf-analyzer-$HOST.txt}"
COMMIT="$(git -C "$REPO" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
GPU="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n1 || true)"
{
  echo "# perf_analyzer against tessera-server (gRPC and HTTP)"
  echo "date: $DATE"
  echo "machine: $(nproc) cores, $(. /etc/os-release && echo "$PRETTY_NAME"), glibc $glibc, GPU: ${GPU:-none}"
  echo "commit: $COMMIT"
  echo "perf_analyzer: $PA"
  echo "server: tessera-server on configs/models, --allow-client-shm (CPU executor unless a GPU backend is built)"
  echo "modes: $MODES"
  top_concurrency="${CONCURRENCY%%:*}"
  [[ "$CONCURRENCY" == *:* ]] && top_concurrency="$(cut -d: -f2 <<<"$CONCURRENCY")"
  for model in $MODELS; do
    for mode in $MODES; do
      echo
      echo "## $model: perf_analyzer, $mode"
      cmd=("$PA" -m "$model" -i grpc -u "$URL" --measurement-interval "$INTERVAL_MS"
           -f "$WORK/$model-$mode.csv")
      case "$mode" in
        sync) cmd+=(--concurrency-range "$CONCURRENCY") ;;
        async) cmd+=(--async --concurrency-range "$top_concurrency") ;;
        batch4) cmd+=(-b 4 --concurrency-range "$top_concurrency") ;;
        shm) cmd+=(--shared-memory system --concurrency-range "$top_concurrency") ;;
        streaming) cmd+=(--streaming --concurrency-range "$top_concurrency") ;;
        http|http-json|http-shm)
          cmd=("$PA" -m "$model" -i http -u "127.0.0.1:$HTTP_PORT" --measurement-interval
               "$INTERVAL_MS" -f "$WORK/$model-$mode.csv" --concurrency-range "$CONCURRENCY")
          # JSON cannot spell the NaNs that random bytes hold: zeros in JSON.
          [[ "$mode" == http-json ]] && cmd+=(--input-tensor-format json --output-tensor-format json
                                             --input-data zero)
          [[ "$mode" == http-shm ]] && cmd+=(--shared-memory system) ;;
        *) echo "unknown mode '$mode' (sync async batch4 shm streaming http http-json http-shm)"; echo "FAILED" >>"$WORK/failed"; continue ;;
      esac
      echo "\$ ${cmd[*]}"
      if "${cmd[@]}" 2>&1; then
        echo "--- CSV"
        cat "$WORK/$model-$mode.csv"
      else
        echo "--- FAILED: perf_analyzer exited non-zero ($model, $mode)"
        echo "$model $mode" >>"$WORK/failed"
      fi
      [[ "$mode" == sync ]] || continue
      echo
      echo "## $model: tessera-bench, the same closed-loop load"
      bcmd=(tessera "$BIN/tessera-bench" -u "$URL" -m "$model" --concurrency-range "$CONCURRENCY"
            --warmup-s 1 --duration-s "$(awk "BEGIN{print $INTERVAL_MS/1000*3}")" --progress off)
      echo "\$ ${bcmd[*]:1}"
      "${bcmd[@]}" 2>&1
    done
  done
  echo
  if [[ -s "$WORK/failed" ]]; then
    echo "# result: perf_analyzer FAILED in: $(tr '\n' ';' <"$WORK/failed")"
  else
    echo "# result: every perf_analyzer run succeeded"
  fi
} | tee "$OUTPUT"
echo "perf_analyzer_compat: wrote $OUTPUT" >&2
[[ ! -s "$WORK/failed" ]]
