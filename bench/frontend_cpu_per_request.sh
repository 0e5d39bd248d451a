#!/usr/bin/env bash
# CPU time and context switches per request of each server in the frontend-overhead comparison
# (bench/frontend_overhead.py): tessera-server + its executor, the bare grpc++ server, and the bare
# server answering from a thread of its own (--answer-thread), each under the same closed-loop
# tessera-bench load, measured with `perf stat` over a window inside the run. Steadier than
# throughput on a shared VM, and it says where the time goes.
#
#   bench/frontend_cpu_per_request.sh [--build-dir build] [--concurrency 16] [--channels 1] [--repeats 2]
#
# Needs perf (Debian linux-perf) with permission to attach to the processes (root, or
# kernel.perf_event_paranoid <= 1).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$REPO/build"
CONCURRENCY=16
CHANNELS=1
REPEATS=2
while (($#)); do
  case "$1" in
    --build-dir) BUILD="$2"; shift 2 ;;
    --concurrency) CONCURRENCY="$2"; shift 2 ;;
    --channels) CHANNELS="$2"; shift 2 ;;
    --repeats) REPEATS="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ "$BUILD" = /* ]] || BUILD="$REPO/$BUILD"
command -v perf >/dev/null || { echo "perf not found (apt-get install linux-perf)" >&2; exit 1; }
BIN="$BUILD/bin"
WORK="$(mktemp -d /tmp/tessera-fcpu.XXXXXX)"
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# The same identity model as frontend_overhead.py: FP32 [1, 256], no batching, one instance.
"$REPO/.venv/bin/python" - "$WORK/models/identity" <<'EOF'
import sys
sys.path.insert(0, "bench")
import benchlib
benchlib.write_identity_model(__import__("pathlib").Path(sys.argv[1]), [256], batching=False)
EOF
P_TESSERA=$(port); P_BARE=$(port); P_ASYNC=$(port)
"$BIN/tessera-server" --model-repository "$WORK/models" --grpc-port "$P_TESSERA" --metrics-port 0 \
  --model-control-mode none >"$WORK/tessera.log" 2>&1 &
TESSERA_PID=$!; pids+=("$TESSERA_PID")
"$BIN/tessera-bare-server" --grpc-port "$P_BARE" --model identity --dims 256 >"$WORK/bare.log" 2>&1 &
BARE_PID=$!; pids+=("$BARE_PID")
"$BIN/tessera-bare-server" --grpc-port "$P_ASYNC" --model identity --dims 256 --answer-thread \
  >"$WORK/async.log" 2>&1 &
ASYNC_PID=$!; pids+=("$ASYNC_PID")
sleep 3
EXECUTOR_PID=$(pgrep -P "$TESSERA_PID" -f tessera-executor | head -1)
[[ -n "$EXECUTOR_PID" ]] || { cat "$WORK/tessera.log" >&2; echo "no tessera-executor" >&2; exit 1; }

echo "closed loop, concurrency $CONCURRENCY over $CHANNELS connection(s), FP32 [1, 256]; perf stat over 3 s inside a 6 s run"
printf '%-22s %10s %16s %14s %16s\n' server "req/s" "server us/req" "switches/req" "client us/req"
for ((r = 1; r <= REPEATS; r++)); do
  for target in tessera bare bare-answer-thread; do
    case $target in
      tessera) url=127.0.0.1:$P_TESSERA; watch="$TESSERA_PID,$EXECUTOR_PID" ;;
      bare) url=127.0.0.1:$P_BARE; watch="$BARE_PID" ;;
      bare-answer-thread) url=127.0.0.1:$P_ASYNC; watch="$ASYNC_PID" ;;
    esac
    "$BIN/tessera-bench" -u "$url" -m identity --concurrency-range "$CONCURRENCY" --channels "$CHANNELS" --warmup-s 1 \
      --duration-s 6 --progress off >"$WORK/bench.out" 2>&1 &
    bench_pid=$!
    sleep 2
    perf stat -x, -e task-clock,context-switches -p "$watch" -- sleep 3 2>"$WORK/server.stat" &
    perf_pid=$!
    perf stat -x, -e task-clock -p "$bench_pid" -- sleep 3 2>"$WORK/client.stat"
    wait "$perf_pid" "$bench_pid"
    throughput=$(awk '$1 == "overall" {print $5}' "$WORK/bench.out")
    server_ms=$(awk -F, '$3 == "task-clock" {print $1}' "$WORK/server.stat")
    switches=$(awk -F, '$3 == "context-switches" {print $1}' "$WORK/server.stat")
    client_ms=$(awk -F, '$3 == "task-clock" {print $1}' "$WORK/client.stat")
    python3 -c "
t = $throughput; n = t * 3
print('%-22s %10.0f %16.1f %14.2f %16.1f' % ('$target', t, $server_ms * 1000 / n, $switches / n,
                                              $client_ms * 1000 / n))"
  done
done
