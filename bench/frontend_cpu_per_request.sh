#!/usr/bin/env bash
# CPU time and context switches per request of each server in the frontend-overhead comparison
# (bench/frontend_overhead.py): tessera-server + its executor, the bare grpc++ server, the bare
# server answering from a thread of its own (--answer-thread), and the bare server whose
# synchronous handler blocks until a thread of its own releases it (--blocking-handler 16, the
# answer leaving from the receiving gRPC thread), each under the same closed-loop
# tessera-bench load, measured with `perf stat` over a window inside the run. Steadier than
# throughput on a shared VM, and it says where the time goes.
#
#   bench/frontend_cpu_per_request.sh [--build-dir build] [--concurrency 16] [--channels 1] [--repeats 2]
#       [--per-thread]
#
# --per-thread also prints, under each server's line, its threads (grouped by name) with their CPU,
# context switches and system calls per request (futex, epoll_wait, socket sends and receives): where
# the wake-ups are. It needs the syscall tracepoints (root, or a permissive perf_event_paranoid).
#
# Needs perf (Debian linux-perf) with permission to attach to the processes (root, or
# kernel.perf_event_paranoid <= 1).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$REPO/build"
CONCURRENCY=16
CHANNELS=1
REPEATS=2
PER_THREAD=0
while (($#)); do
  case "$1" in
    --build-dir) BUILD="$2"; shift 2 ;;
    --concurrency) CONCURRENCY="$2"; shift 2 ;;
    --channels) CHANNELS="$2"; shift 2 ;;
    --repeats) REPEATS="$2"; shift 2 ;;
    --per-thread) PER_THREAD=1; shift ;;
    -h|--help) sed -n '2,16p' "${BASH_SOURCE[0]}"; exit 0 ;;
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
P_TESSERA=$(port); P_BARE=$(port); P_ASYNC=$(port); P_BLOCKING=$(port)
"$BIN/tessera-server" --model-repository "$WORK/models" --grpc-port "$P_TESSERA" --metrics-port 0 --http-port -1 \
  --model-control-mode none >"$WORK/tessera.log" 2>&1 &
TESSERA_PID=$!; pids+=("$TESSERA_PID")
"$BIN/tessera-bare-server" --grpc-port "$P_BARE" --model identity --dims 256 >"$WORK/bare.log" 2>&1 &
BARE_PID=$!; pids+=("$BARE_PID")
"$BIN/tessera-bare-server" --grpc-port "$P_ASYNC" --model identity --dims 256 --answer-thread \
  >"$WORK/async.log" 2>&1 &
ASYNC_PID=$!; pids+=("$ASYNC_PID")
"$BIN/tessera-bare-server" --grpc-port "$P_BLOCKING" --model identity --dims 256 \
  --blocking-handler 16 >"$WORK/blocking.log" 2>&1 &
BLOCKING_PID=$!; pids+=("$BLOCKING_PID")
sleep 3
EXECUTOR_PID=$(pgrep -P "$TESSERA_PID" -f tessera-executor | head -1)
[[ -n "$EXECUTOR_PID" ]] || { cat "$WORK/tessera.log" >&2; echo "no tessera-executor" >&2; exit 1; }

THREAD_EVENTS=task-clock,context-switches,raw_syscalls:sys_enter,syscalls:sys_enter_futex
THREAD_EVENTS+=,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_sendmsg,syscalls:sys_enter_recvmsg
THREAD_EVENTS+=,syscalls:sys_enter_sendto,syscalls:sys_enter_recvfrom
# print_threads REQ_PER_S STAT_FILE: per-request figures of each thread name (perf stat --per-thread).
print_threads() {
  python3 - "$1" "$2" <<'EOF'
import collections, sys
requests = float(sys.argv[1]) * 3
per_name = collections.defaultdict(collections.Counter)
threads = collections.defaultdict(set)
for line in open(sys.argv[2]):
    fields = line.strip().split(",")
    if len(fields) < 4 or not fields[1].replace(".", "").isdigit():
        continue
    name, tid = fields[0].rsplit("-", 1)
    per_name[name][fields[3].split(":")[-1]] += float(fields[1])
    threads[name].add(tid)
columns = [("task-clock", "us"), ("context-switches", "switches"), ("sys_enter", "syscalls"),
           ("sys_enter_futex", "futex"), ("sys_enter_epoll_wait", "epoll_wait"),
           ("sys_enter_sendmsg", "sendmsg"), ("sys_enter_recvmsg", "recvmsg"),
           ("sys_enter_sendto", "sendto"), ("sys_enter_recvfrom", "recvfrom")]
print("    " + f"{'thread (count)':24}" + "".join(f"{label:>11}" for _, label in columns))
for name, counts in sorted(per_name.items(), key=lambda item: -item[1]["task-clock"]):
    if counts["task-clock"] * 1000 / requests < 0.05:
        continue
    cells = [counts[event] / requests * (1000 if event == "task-clock" else 1)
             for event, _ in columns]
    label = f"{name} ({len(threads[name])})"
    print("    " + f"{label:24}" + "".join(f"{cell:11.2f}" for cell in cells))
EOF
}

echo "closed loop, concurrency $CONCURRENCY over $CHANNELS connection(s), FP32 [1, 256]; perf stat over 3 s inside a 6 s run"
printf '%-22s %10s %16s %14s %16s\n' server "req/s" "server us/req" "switches/req" "client us/req"
for ((r = 1; r <= REPEATS; r++)); do
  for target in tessera bare bare-answer-thread bare-blocking-handler; do
    case $target in
      tessera) url=127.0.0.1:$P_TESSERA; watch="$TESSERA_PID,$EXECUTOR_PID" ;;
      bare) url=127.0.0.1:$P_BARE; watch="$BARE_PID" ;;
      bare-answer-thread) url=127.0.0.1:$P_ASYNC; watch="$ASYNC_PID" ;;
      bare-blocking-handler) url=127.0.0.1:$P_BLOCKING; watch="$BLOCKING_PID" ;;
    esac
    "$BIN/tessera-bench" -u "$url" -m identity --concurrency-range "$CONCURRENCY" --channels "$CHANNELS" --warmup-s 1 \
      --duration-s 6 --progress off >"$WORK/bench.out" 2>&1 &
    bench_pid=$!
    sleep 2
    if ((PER_THREAD)); then
      perf stat -x, --per-thread -e "$THREAD_EVENTS" -p "$watch" -- sleep 3 2>"$WORK/threads.stat" &
    else
      perf stat -x, -e task-clock,context-switches -p "$watch" -- sleep 3 2>"$WORK/server.stat" &
    fi
    perf_pid=$!
    perf stat -x, -e task-clock -p "$bench_pid" -- sleep 3 2>"$WORK/client.stat"
    wait "$perf_pid" "$bench_pid"
    throughput=$(awk '$1 == "overall" {print $5}' "$WORK/bench.out")
    if ((PER_THREAD)); then
      # The process totals are the sums over the threads.
      awk -F, '$4 == "task-clock" || $4 == "context-switches" {sum[$4] += $2}
               END {printf "%s,,task-clock\n%s,,context-switches\n", sum["task-clock"],
                    sum["context-switches"]}' "$WORK/threads.stat" >"$WORK/server.stat"
    fi
    server_ms=$(awk -F, '$3 == "task-clock" {print $1}' "$WORK/server.stat")
    switches=$(awk -F, '$3 == "context-switches" {print $1}' "$WORK/server.stat")
    client_ms=$(awk -F, '$3 == "task-clock" {print $1}' "$WORK/client.stat")
    python3 -c "
t = $throughput; n = t * 3
print('%-22s %10.0f %16.1f %14.2f %16.1f' % ('$target', t, $server_ms * 1000 / n, $switches / n,
                                              $client_ms * 1000 / n))"
    if ((PER_THREAD)); then print_threads "$throughput" "$WORK/threads.stat"; fi
  done
done
