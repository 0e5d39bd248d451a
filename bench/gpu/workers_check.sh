#!/usr/bin/env bash
# Issue 5 item 6 on a GPU machine: multi-granularity workers (E²bird) served by tessera-server with
# `executors.devices: gpu`. The bundled mlp and small_cnn get `worker_batch_sizes: [8, 4, 2, 1]`
# (four instances on one executor, one weight copy, each instance its own CUDA stream), tessera-bench
# drives both at concurrency 16, and the script prints the metrics that say which worker ran each
# batch, how many batches came from the input pool, and the executor's input-mirror count.
#
#   On the build machine:  scripts/gpu_check_engine.sh bundle build
#   On the GPU machine:    run(carry=["build/gpu-bundle.tar.xz"], command="bench/gpu/workers_check.sh build")
#
# TESSERA_WORKERS_DEVICES=cpu runs the same check without a GPU. Output under $OUT/tessera-workers
# (or /tmp/...). Exit status 0 when the bench saw no error, every
# batch ran on a worker and at least two worker sizes ran.
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=scripts/gpu_env.sh
source "$REPO/scripts/gpu_env.sh"
tessera_gpu_build "$REPO" "${1:-}" tessera-server
LOGS="${TESSERA_GPU_LOG_DIR:-${OUT:-/tmp}/tessera-workers}"
mkdir -p "$LOGS"

REPOSITORY="$LOGS/repository"
rm -rf "$REPOSITORY"
mkdir -p "$REPOSITORY"
for model in mlp small_cnn; do
  cp -r "$REPO/configs/models/$model" "$REPOSITORY/"
  # The workers replace instance_group's count.
  python3 - "$REPOSITORY/$model/config.yaml" <<'PY'
import re, sys
path = sys.argv[1]
text = open(path).read()
text = re.sub(r"instance_group:\n(  .*\n)+", "", text)
open(path, "w").write(text + "worker_batch_sizes: [8, 4, 2, 1]\n")
PY
done
printf 'executors:\n  devices: %s\n' "${TESSERA_WORKERS_DEVICES:-gpu}" >"$LOGS/server.yaml"

TESSERA_REPO="$REPO" tessera_gpu_libpath "$BUILD/gpu-bundle"
py_ld="$ORIG_LD_LIBRARY_PATH"
tessera_start_server "$LOGS/server.yaml" "$REPOSITORY" "$LOGS"
status=1
if [[ $ready -eq 1 ]]; then
  "$BIN/tessera-bench" -u "127.0.0.1:$grpc" -m mlp -m small_cnn --concurrency-range 16 \
    --warmup-s 1 --duration-s 5 --progress off --fail-on-error 2>&1 | tee "$LOGS/bench.txt"
  bench_rc=${PIPESTATUS[0]}
  env LD_LIBRARY_PATH="$py_ld" python3 - "$metrics" "$bench_rc" <<'PY' | tee "$LOGS/metrics.txt"
import re, sys, urllib.request
port, bench_rc = sys.argv[1], int(sys.argv[2])
text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
def samples(name):
    out = []
    for line in text.splitlines():
        m = re.match(rf'{name}\{{(.*)\}} ([0-9.e+-]+)$', line)
        if m:
            out.append((dict(re.findall(r'(\w+)="([^"]*)"', m.group(1))), float(m.group(2))))
    return out
ok = bench_rc == 0
for model in ("mlp", "small_cnn"):
    execs = sum(v for l, v in samples("nv_inference_exec_count") if l.get("model") == model)
    by = {l["worker_batch"]: v for l, v in samples("tessera_worker_batches_total")
          if l.get("model") == model}
    print(f"{model}: {execs:.0f} batches; by worker size {by}")
    ok &= execs > 0 and sum(by.values()) == execs and sum(1 for v in by.values() if v > 0) >= 2
pool = {l["path"]: v for l, v in samples("tessera_input_pool_batches_total")}
mirrored = sum(v for _, v in samples("tessera_input_pool_mirrored_batches_total"))
print(f"input pool batches: {pool}, read from the input mirror: {mirrored:.0f}")
print("workers check:", "ok" if ok else "FAILED")
sys.exit(0 if ok else 1)
PY
  status=$?
fi
tessera_stop_server "$LOGS" "workers [0-9/]+ on executor|warmed up|read from the input mirror"
exit $status
