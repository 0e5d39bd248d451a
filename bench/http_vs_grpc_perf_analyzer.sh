#!/usr/bin/env bash
# Tessera's HTTP/REST endpoint against its gRPC endpoint, same server, same run: perf_analyzer
# (scripts/fetch_perf_analyzer.sh) drives each bundled model (no queue delay) over both protocols,
# alternating, with binary tensors (perf_analyzer's default) and, with --json, JSON tensors too.
# Prints throughput and p50/p99 per protocol, then HTTP's throughput as a ratio of gRPC's.
#
#   bench/http_vs_grpc_perf_analyzer.sh [--rounds 2] [--concurrency "1 4"] [--json] [--bin build/bin]
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ROUNDS=2
CONCURRENCY="1 4"
BIN="$REPO/build/bin"
FORMATS="binary"
while (($#)); do
  case "$1" in
    --rounds) ROUNDS="$2"; shift 2 ;;
    --concurrency) CONCURRENCY="$2"; shift 2 ;;
    --json) FORMATS="binary json"; shift ;;
    --bin) BIN="$2"; shift 2 ;;
    -h|--help) sed -n '2,7p' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
PA="${TESSERA_PERF_ANALYZER:-$REPO/.cache/perf_analyzer/bin/perf_analyzer}"
[[ -x "$PA" ]] || { echo "$PA not found: run scripts/fetch_perf_analyzer.sh" >&2; exit 2; }

work="$(mktemp -d)"
trap 'kill "$server" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
for m in mlp small_cnn; do
  cp -r "$REPO/configs/models/$m" "$work/$m"
  sed -i "s/max_queue_delay_microseconds: .*/max_queue_delay_microseconds: 0/" "$work/$m/config.yaml"
done
grpc_port=$((20000 + RANDOM % 20000))
http_port=$((grpc_port + 1))
"$BIN/tessera-server" --model-repository "$work" --grpc-port "$grpc_port" --http-port "$http_port" \
  --metrics-port 0 --model-control-mode none > "$work/server.log" 2>&1 &
server=$!
for _ in $(seq 100); do
  (( $(grep -c "ready, version" "$work/server.log" || true) >= 2 )) && break
  sleep 0.2
done

echo "# commit $(git -C "$REPO" rev-parse --short HEAD), $(nproc) CPUs, $(date -u +%F)"
printf '%-6s %-10s %-5s %-12s %12s %9s %9s\n' round model conc protocol "infer/s" "p50 us" "p99 us"
declare -A sum
for round in $(seq "$ROUNDS"); do
  for m in mlp small_cnn; do
    for c in $CONCURRENCY; do
      for protocol in grpc $(printf 'http-%s ' $FORMATS); do
        args=(-i grpc -u "127.0.0.1:$grpc_port")
        if [[ "$protocol" == http-* ]]; then
          args=(-i http -u "127.0.0.1:$http_port" --input-tensor-format "${protocol#http-}"
                --output-tensor-format "${protocol#http-}")
        fi
        out="$("$PA" -m "$m" "${args[@]}" --concurrency-range "$c" --input-data zero \
               --measurement-interval 2000 --stability-percentage 30 --max-trials 8 2>&1 || true)"
        tput="$(awk '/^ +Throughput:/ {print $2; exit}' <<<"$out")"
        p50="$(awk '/p50 latency/ {print $3; exit}' <<<"$out")"
        p99="$(awk '/p99 latency/ {print $3; exit}' <<<"$out")"
        [[ -n "$tput" ]] || echo "$out" | tail -3 >&2
        printf '%-6s %-10s %-5s %-12s %12s %9s %9s\n' "$round" "$m" "$c" "$protocol" \
          "${tput:-unstable}" "${p50:--}" "${p99:--}"
        key="$m $c $protocol"
        sum[$key]="$(awk -v a="${sum[$key]:-0}" -v b="${tput:-0}" 'BEGIN {print a + b}')"
      done
    done
  done
done
echo
echo "HTTP throughput / gRPC throughput (sums over rounds)"
for m in mlp small_cnn; do
  for c in $CONCURRENCY; do
    for format in $FORMATS; do
      awk -v h="${sum[$m $c http-$format]}" -v g="${sum[$m $c grpc]}" -v m="$m" -v c="$c" \
        -v f="$format" 'BEGIN {printf "%-10s c=%-3s %-7s %.2fx\n", m, c, f, (g > 0 ? h / g : 0)}'
    done
  done
done
