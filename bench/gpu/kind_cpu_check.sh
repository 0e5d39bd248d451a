#!/usr/bin/env bash
# Instance placement on a GPU server (instance_placement.h): the bundled mlp keeps its KIND_AUTO
# instance (GPU 0, the CUDA backend) and small_cnn gets `instance_group: [{kind: KIND_CPU}]`,
# which must start a CPU executor beside the GPU ones and run small_cnn there. A third model,
# hardmax_auto (one Hardmax, an op the CUDA backend has no kernel for, written here with python's
# onnx), is KIND_AUTO: the GPU executor refuses it, so it must load on that CPU executor, with the
# server's warning, and report KIND_CPU in its config. tessera-bench drives the three at
# concurrency 8; the script then reads the server log for the executors' devices and the
# placement lines, and /metrics for each model's executions. On a GPU server it also checks
# the GPU metrics (metrics.gpu, NVML): each GPU's nv_gpu_* gauges and nv_energy_consumption are
# there, labelled with the UUID nvidia-smi reports, with the memory total nvidia-smi reports.
#
#   On the build machine:  scripts/gpu_check_engine.sh bundle build
#   On the GPU machine:    run(carry=["build/gpu-bundle.tar.xz"], command="bench/gpu/kind_cpu_check.sh build")
#
# TESSERA_KIND_CPU_DEVICES=cpu runs it on a CPU server, where every instance shares the CPU
# executors and no executor is added. Output under $OUT/tessera-kind-cpu (or /tmp/...). Exit
# status 0 when the bench saw no error, the three models ran, and (on a GPU server) small_cnn's
# and hardmax_auto's instances ran on the executor started on cpu. TESSERA_PYTHON names the
# python with onnx (default python3).
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=scripts/gpu_env.sh
source "$REPO/scripts/gpu_env.sh"
tessera_gpu_build "$REPO" "${1:-}" tessera-server
LOGS="${TESSERA_GPU_LOG_DIR:-${OUT:-/tmp}/tessera-kind-cpu}"
DEVICES="${TESSERA_KIND_CPU_DEVICES:-gpu}"
mkdir -p "$LOGS"

REPOSITORY="$LOGS/repository"
rm -rf "$REPOSITORY"
mkdir -p "$REPOSITORY"
cp -r "$REPO/configs/models/mlp" "$REPO/configs/models/small_cnn" "$REPOSITORY/"
sed -i 's/kind: KIND_AUTO/kind: KIND_CPU/' "$REPOSITORY/small_cnn/config.yaml"
grep -q "kind: KIND_CPU" "$REPOSITORY/small_cnn/config.yaml" || { echo "no KIND_CPU set"; exit 1; }
mkdir -p "$REPOSITORY/hardmax_auto/1"
"${TESSERA_PYTHON:-python3}" - "$REPOSITORY/hardmax_auto/1/model.onnx" <<'PY' || exit 1
import sys
from onnx import TensorProto, helper, save
graph = helper.make_graph(
    [helper.make_node("Hardmax", ["x"], ["y"], axis=-1)], "hardmax_auto",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 16])])
save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
PY
cat >"$REPOSITORY/hardmax_auto/config.yaml" <<'YAML'
name: hardmax_auto
platform: onnx
max_batch_size: 8
instance_group:
  - count: 1
    kind: KIND_AUTO
YAML
printf 'executors:\n  devices: %s\n' "$DEVICES" >"$LOGS/server.yaml"

TESSERA_REPO="$REPO" tessera_gpu_libpath "$BUILD/gpu-bundle"
py_ld="$ORIG_LD_LIBRARY_PATH"
tessera_start_server "$LOGS/server.yaml" "$REPOSITORY" "$LOGS"
status=1
if [[ $ready -eq 1 ]]; then
  "$BIN/tessera-bench" -u "127.0.0.1:$grpc" -m mlp -m small_cnn -m hardmax_auto --concurrency-range 8 \
    --warmup-s 1 --duration-s 4 --progress off --fail-on-error 2>&1 | tee "$LOGS/bench.txt"
  bench_rc=${PIPESTATUS[0]}
  env LD_LIBRARY_PATH="$py_ld" python3 - "$metrics" "$bench_rc" "$DEVICES" "$LOGS/server.log" <<'PY' | tee "$LOGS/check.txt"
import re, sys, urllib.request
port, bench_rc, devices, log_path = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode()
log = open(log_path).read()
ok = bench_rc == 0
for model in ("mlp", "small_cnn", "hardmax_auto"):
    execs = sum(float(v) for m, v in re.findall(r'nv_inference_exec_count\{([^}]*)\} ([0-9.e+-]+)', text)
                if f'model="{model}"' in m)
    print(f"{model}: {execs:.0f} batches")
    ok &= execs > 0
started = re.findall(r"executor (\d+) \(pid \d+\) started on (\S+)", log)
print("executors:", started)
def placed_on(model):
    return re.findall(rf"model '{model}' version \d+: instance \S+ runs on executor (\d+) \((\S+)\)", log)
placed, fallen = placed_on("small_cnn"), placed_on("hardmax_auto")
warned = "model 'hardmax_auto' version 1: the GPU cannot run it" in log
print("small_cnn placed:", placed, "hardmax_auto placed:", fallen, "fallback warning:", warned)
if devices == "cpu":
    ok &= bool(started) and not placed and not fallen and not warned
    ok &= all(device == "cpu" for _, device in started)
else:
    # One small_cnn instance, on an executor that started on the CPU; hardmax_auto's instance
    # on the same one, after the GPU's refusal.
    ok &= len(placed) == 1 and placed[0][1] == "cpu" and (placed[0][0], "cpu") in started
    ok &= fallen == placed and warned
    ok &= any(device.startswith("cuda:") for _, device in started)
print("KIND_CPU and KIND_AUTO fallback check:", "ok" if ok else "FAILED")
if devices != "cpu":
    # metrics.gpu: the gauges of server-config.md, one series per GPU, against nvidia-smi.
    import subprocess
    gpu = {}
    for name, labels, value in re.findall(r'^(nv_gpu_\w+|nv_energy_consumption)\{([^}]*)\} (\S+)', text, re.M):
        uuid = re.search(r'gpu_uuid="([^"]*)"', labels)
        gpu.setdefault(uuid.group(1) if uuid else "?", {})[name] = float(value)
    smi = subprocess.run(["nvidia-smi", "--query-gpu=uuid,memory.total", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True).stdout.strip().splitlines()
    print("nvidia-smi:", smi)
    gpu_ok = bool(gpu) and len(gpu) == len(smi)
    for line in smi:
        uuid, total_mib = [x.strip() for x in line.split(",")]
        series = gpu.get(uuid, {})
        print(f"{uuid}: {series}")
        gpu_ok &= all(k in series for k in ("nv_gpu_utilization", "nv_gpu_memory_total_bytes",
                                             "nv_gpu_memory_used_bytes"))
        gpu_ok &= 0 <= series.get("nv_gpu_utilization", -1) <= 1
        gpu_ok &= abs(series.get("nv_gpu_memory_total_bytes", 0) / 2**20 - float(total_mib)) <= 1
        gpu_ok &= 0 < series.get("nv_gpu_memory_used_bytes", 0) <= series.get("nv_gpu_memory_total_bytes", 0)
    print("GPU metrics check:", "ok" if gpu_ok else "FAILED")
    ok &= gpu_ok
sys.exit(0 if ok else 1)
PY
  status=$?
fi
tessera_stop_server "$LOGS" "started on|runs on executor|cannot run it"
exit $status
