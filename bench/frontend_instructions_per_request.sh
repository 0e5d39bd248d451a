#!/usr/bin/env bash
# User-space instructions per request of each server in the frontend-overhead comparison
# (bench/frontend_overhead.py), counted by valgrind's callgrind: tessera-server, the bare grpc++
# server, and the bare server answering from a thread of its own (--answer-thread). Tessera's
# executor runs natively and is not counted (it re-executes itself with its OpenMP settings, which
# callgrind cannot follow); its share of the CPU is in bench/frontend_cpu_per_request.sh.
# Each runs under callgrind; a short load warms it up, then instrumentation is switched on for a
# closed-loop tessera-bench run of --duration-s seconds and the count is divided by the requests
# the run completed.
#
# Why: on a shared 2-core VM, CPU time per request (bench/frontend_cpu_per_request.sh) moves by
# ±20 % between runs, so a change worth a few percent cannot be seen in it. Instruction counts
# repeat within about 1 %. They leave out the kernel (syscalls, context switches) and cache
# effects, so read them next to the CPU-time script, not instead of it. Under callgrind the
# threads run one at a time and about 50x slower, so bursts are shaped differently from a native
# run; compare builds with each other here, not with native figures.
#
#   bench/frontend_instructions_per_request.sh [--build-dir build] [--duration-s 10]
#       [--concurrency 64] [--channels 4] [--top 0] [--only tessera|bare|bare-answer-thread]
#
# --top N also prints Tessera's N costliest functions (inclusive instructions per request) from
# the server process. Needs valgrind (Debian package valgrind).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="$REPO/build"
DURATION=10
CONCURRENCY=64
CHANNELS=4
TOP=0
ONLY=""
while (($#)); do
  case "$1" in
    --build-dir) BUILD="$2"; shift 2 ;;
    --duration-s) DURATION="$2"; shift 2 ;;
    --concurrency) CONCURRENCY="$2"; shift 2 ;;
    --channels) CHANNELS="$2"; shift 2 ;;
    --top) TOP="$2"; shift 2 ;;
    --only) ONLY="$2"; shift 2 ;;
    -h|--help) sed -n '2,21p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "unknown argument '$1'" >&2; exit 2 ;;
  esac
done
[[ "$BUILD" = /* ]] || BUILD="$REPO/$BUILD"
for tool in valgrind callgrind_control callgrind_annotate; do
  command -v "$tool" >/dev/null || { echo "$tool not found (apt-get install valgrind)" >&2; exit 1; }
done
BIN="$BUILD/bin"
WORK="$(mktemp -d /tmp/tessera-finstr.XXXXXX)"
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]]; then kill "$server_pid" 2>/dev/null || true; fi
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# The same identity model as frontend_overhead.py: FP32 [1, 256], no batching, one instance.
"$REPO/.venv/bin/python" - "$WORK/models/identity" <<'EOF'
import pathlib, sys
sys.path.insert(0, "bench")
import benchlib
benchlib.write_identity_model(pathlib.Path(sys.argv[1]), [256], batching=False)
EOF

load() {  # load URL SECONDS OUT
  "$BIN/tessera-bench" -u "$1" -m identity --concurrency-range "$CONCURRENCY" --channels "$CHANNELS" \
    --warmup-s 0 --duration-s "$2" --progress off >"$3" 2>&1
}

# Prints "target process instructions requests" lines for one server.
measure() {
  local target=$1 out="$WORK/$1" url
  mkdir -p "$out"
  local port_number
  port_number=$(port)
  url=127.0.0.1:$port_number
  local callgrind=(valgrind --tool=callgrind --instr-atstart=no "--callgrind-out-file=$out/cg.%p")
  case $target in
    tessera)
      "${callgrind[@]}" "$BIN/tessera-server" --model-repository "$WORK/models" \
        --grpc-port "$port_number" --metrics-port 0 --http-port -1 --model-control-mode none >"$out/log" 2>&1 & ;;
    bare)
      "${callgrind[@]}" "$BIN/tessera-bare-server" --grpc-port "$port_number" --model identity \
        --dims 256 >"$out/log" 2>&1 & ;;
    bare-answer-thread)
      "${callgrind[@]}" "$BIN/tessera-bare-server" --grpc-port "$port_number" --model identity \
        --dims 256 --answer-thread >"$out/log" 2>&1 & ;;
  esac
  server_pid=$!
  # Ready when a load of one second completes requests (loading under callgrind takes a while).
  local ready=0
  for _ in $(seq 20); do
    load "$url" 1 "$out/warmup.out" || true
    if awk '$1 == "overall" && $5 > 0 {found=1} END {exit !found}' "$out/warmup.out"; then
      ready=1
      break
    fi
    sleep 1
  done
  ((ready)) || { cat "$out/log" >&2; echo "$target did not answer under callgrind" >&2; exit 1; }
  load "$url" 2 "$out/warmup.out"
  callgrind_control -i on >/dev/null 2>&1
  load "$url" "$DURATION" "$out/bench.out"
  callgrind_control -i off >/dev/null 2>&1
  callgrind_control -d >/dev/null 2>&1
  sleep 1
  kill "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=""
  local rate requests
  rate=$(awk '$1 == "overall" {print $5}' "$out/bench.out")
  requests=$(python3 -c "print(round($rate * $DURATION))")
  # The dump asked for above holds the measured window (cg.PID.1); the one at exit holds nothing.
  for dump in "$out"/cg.*.1; do
    local cmd total
    cmd=$(awk '/^cmd:/ {print $2; exit}' "$dump")
    total=$(awk '/^totals:/ {print $2; exit}' "$dump")
    [[ -n "$total" && "$total" != 0 ]] || continue
    echo "$target $(basename "$cmd") $total $requests $dump"
  done
}

echo "closed loop, concurrency $CONCURRENCY over $CHANNELS connection(s), FP32 [1, 256];" \
  "callgrind over a $DURATION s run"
targets=(tessera bare bare-answer-thread)
[[ -n "$ONLY" ]] && targets=("$ONLY")
for target in "${targets[@]}"; do measure "$target"; done >"$WORK/counts"
python3 - "$WORK/counts" <<'EOF'
import collections, sys
per_target = collections.defaultdict(dict)
requests = {}
for line in open(sys.argv[1]):
    target, process, total, count, _ = line.split()
    per_target[target][process] = per_target[target].get(process, 0) + int(total)
    requests[target] = int(count)
print(f"{'server':20} {'process':18} {'requests':>9} {'instructions/request':>21}")
sums = {}
for target, processes in per_target.items():
    n = max(requests[target], 1)
    for process, total in sorted(processes.items()):
        print(f"{target:20} {process:18} {n:9d} {total / n:21,.0f}")
    sums[target] = sum(processes.values()) / n
    if len(processes) > 1:
        print(f"{target:20} {'(all)':18} {n:9d} {sums[target]:21,.0f}")
if "bare" in sums:
    for target, value in sums.items():
        if target != "bare":
            print(f"{target} / bare: {value / sums['bare']:.2f}x instructions per request")
EOF
if ((TOP > 0)) && grep -q '^tessera tessera-server' "$WORK/counts"; then
  read -r _ _ _ requests dump < <(grep '^tessera tessera-server' "$WORK/counts")
  echo
  echo "tessera-server: the $TOP costliest Tessera functions, inclusive instructions per request"
  callgrind_annotate --inclusive=yes --threshold=100 "$dump" 2>/dev/null |
    awk -v n="$requests" -v top="$TOP" '
      /tessera::/ && $1 ~ /^[0-9,]+$/ {
        count = $1; gsub(",", "", count)
        name = $0; sub(/^[^:]*:/, "", name); sub(/ \[[^]]*\]$/, "", name)
        name = substr(name, 1, 110)
        if (seen[name]++) next
        printf "%10.0f  %s\n", count / n, name
        if (++shown == top) exit
      }'
fi
