#!/usr/bin/env bash
# A/B of two or more tessera-server builds on the frontend-overhead load: the identity model of
# bench/frontend_overhead.py (FP32 [1, 256], no batching), a closed-loop tessera-bench run per build,
# builds alternated round by round so that the VM's drift hits them alike. Prints req/s and the
# server process's CPU per request (perf stat task-clock over 3 s inside each 6 s run).
#
#   bench/frontend_server_ab.sh [--concurrency 64] [--channels 4] [--rounds 4] BIN_DIR BIN_DIR...
#
# Each BIN_DIR holds a tessera-server and the tessera-executor it starts (the one beside it).
# Compare within one run only: on the shared 2-core VM single runs swing by +-15 %.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CONCURRENCY=64
CHANNELS=4
ROUNDS=4
dirs=()
while (($#)); do
  case "$1" in
    --concurrency) CONCURRENCY="$2"; shift 2 ;;
    --channels) CHANNELS="$2"; shift 2 ;;
    --rounds) ROUNDS="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) dirs+=("$1"); shift ;;
  esac
done
((${#dirs[@]} >= 2)) || { echo "give two or more build folders (see --help)" >&2; exit 2; }
for d in "${dirs[@]}"; do
  [[ -x "$d/tessera-server" && -x "$d/tessera-executor" ]] || { echo "$d: no tessera-server and tessera-executor" >&2; exit 2; }
done
command -v perf >/dev/null || { echo "perf not found (apt-get install linux-perf)" >&2; exit 1; }
BENCH="$REPO/build/bin/tessera-bench"
WORK="$(mktemp -d /tmp/tessera-ab.XXXXXX)"
server_pid=""
cleanup() { [[ -n "$server_pid" ]] && kill "$server_pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

"$REPO/.venv/bin/python" - "$WORK/models/identity" <<'EOF'
import pathlib, sys
sys.path.insert(0, "bench")
import benchlib
benchlib.write_identity_model(pathlib.Path(sys.argv[1]), [256], batching=False)
EOF
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

echo "closed loop, concurrency $CONCURRENCY over $CHANNELS connection(s), FP32 [1, 256], $ROUNDS rounds"
printf '%-6s %-40s %10s %18s\n' round build "req/s" "server us/req"
for ((round = 1; round <= ROUNDS; round++)); do
  for d in "${dirs[@]}"; do
    "$d/tessera-server" --model-repository "$WORK/models" --grpc-port "$PORT" --metrics-port 0 \
      --model-control-mode none >"$WORK/server.log" 2>&1 &
    server_pid=$!
    sleep 3
    "$BENCH" -u "127.0.0.1:$PORT" -m identity --concurrency-range "$CONCURRENCY" \
      --channels "$CHANNELS" --warmup-s 1 --duration-s 6 --progress off >"$WORK/bench.out" 2>&1 &
    bench_pid=$!
    sleep 2
    perf stat -x, -e task-clock -p "$server_pid" -- sleep 3 2>"$WORK/server.stat"
    wait "$bench_pid"
    kill -TERM "$server_pid"; wait "$server_pid" || true; server_pid=""
    rps=$(awk '$1 == "overall" {print $5}' "$WORK/bench.out")
    ms=$(awk -F, '$3 == "task-clock" {print $1}' "$WORK/server.stat")
    python3 -c "r = $rps; print('%-6d %-40s %10.0f %18.1f' % ($round, '$d'[-40:], r, $ms * 1000 / (r * 3)))"
  done
done
