#!/usr/bin/env bash
# The response cache against running the model, in one server and one run: perf_analyzer (the
# binary scripts/fetch_perf_analyzer.sh fetches) sends the same zeros again and again to each
# bundled model and to a copy of it with `response_cache: {enable: true}`, both without queue
# delay, rounds alternating so that the VM's drift hits them alike. Prints throughput and p50/p99
# per model and concurrency, then each model's ModelStatistics (successes, cache hits and misses,
# executions). (perf_analyzer was seen to print "Server: Request count: 0" for runs made only of
# cache hits, so the script reads the statistics itself.)
#
#   bench/response_cache_perf_analyzer.sh [--rounds 2] [--concurrency "1 4"] [--bin build/bin]
#
# Every request is identical, so the cached model answers all but the first from the cache:
# this is the cache's best case, and the plain model's figures are the cost it saves.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS=2
CONCURRENCY="1 4"
BIN="$REPO/build/bin"
while (($#)); do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    --concurrency) CONCURRENCY="$2"; shift 2 ;;
    --bin) BIN="$2"; shift 2 ;;
    -h|--help) sed -n '2,11p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
PA="${TESSERA_PERF_ANALYZER:-$REPO/.cache/perf_analyzer/bin/perf_analyzer}"
[[ -x "$PA" ]] || { echo "$PA not found: run scripts/fetch_perf_analyzer.sh" >&2; exit 2; }

work="$(mktemp -d)"
trap 'kill "$server" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
models=()
for m in mlp small_cnn; do
  for variant in "" _cached; do
    cp -r "$REPO/configs/models/$m" "$work/$m$variant"
    sed -i "s/^name: .*/name: $m$variant/; s/max_queue_delay_microseconds: .*/max_queue_delay_microseconds: 0/" \
      "$work/$m$variant/config.yaml"
    models+=("$m$variant")
  done
  printf 'response_cache:\n  enable: true\n' >> "$work/${m}_cached/config.yaml"
done
port=$((20000 + RANDOM % 20000))
"$BIN/tessera-server" --model-repository "$work" --grpc-port "$port" --metrics-port 0 --http-port -1 \
  --model-control-mode none --cache-config local,size=16777216 > "$work/server.log" 2>&1 &
server=$!
for _ in $(seq 100); do
  (( $(grep -c "ready, version" "$work/server.log" || true) >= ${#models[@]} )) && break
  sleep 0.2
done

echo "# commit $(git -C "$REPO" rev-parse --short HEAD), $(nproc) CPUs, $(date -u +%F)"
printf '%-6s %-18s %-5s %12s %9s %9s\n' round model conc "infer/s" "p50 us" "p99 us"
for round in $(seq "$ROUNDS"); do
  for m in "${models[@]}"; do
    for c in $CONCURRENCY; do
      out="$("$PA" -m "$m" -i grpc -u "127.0.0.1:$port" --concurrency-range "$c" --input-data zero \
             --measurement-interval 2000 --stability-percentage 30 --max-trials 8 2>&1 || true)"
      tput="$(awk '/^ +Throughput:/ {print $2; exit}' <<<"$out")"
      p50="$(awk '/p50 latency/ {print $3; exit}' <<<"$out")"
      p99="$(awk '/p99 latency/ {print $3; exit}' <<<"$out")"
      [[ -n "$tput" ]] || echo "$out" | tail -3 >&2
      printf '%-6s %-18s %-5s %12s %9s %9s\n' "$round" "$m" "$c" "${tput:-unstable}" \
        "${p50:--}" "${p99:--}"
    done
  done
done
"$REPO/.venv/bin/python" - "$port" "${models[@]}" <<'PY'
import sys
import tritonclient.grpc as grpcclient

client = grpcclient.InferenceServerClient(f"127.0.0.1:{sys.argv[1]}")
print(f"{'model':18s} {'successes':>10s} {'cache hits':>10s} {'misses':>7s} {'executions':>10s}")
for model in sys.argv[2:]:
    s = client.get_inference_statistics(model).model_stats[0]
    i = s.inference_stats
    print(f"{model:18s} {i.success.count:10d} {i.cache_hit.count:10d} {i.cache_miss.count:7d} "
          f"{s.execution_count:10d}")
PY
