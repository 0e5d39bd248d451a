#!/usr/bin/env bash
# The input pool's wrap-around on the CPU: two gpulets serving a model with ResNet-sized inputs
# (3x224x224 FP32, 602 KB per request) whose compute is a GlobalAveragePool, so the run is all
# staging, pooling and copying. Runs tessera-gpulet-bench with the host input mirror, once
# without spill areas (batches straddling a sub-ring's wrap are gathered) and once with them
# (their head is copied after their tail), alternating, and prints each run's pool lines.
#
#   bench/gpulet/input_pool_wrap_cpu.sh [BUILD_DIR] [ROUNDS]
set -euo pipefail

cd "$(dirname "$0")/../.."
build=${1:-build}
rounds=${2:-2}
python=${TESSERA_PYTHON:-.venv/bin/python}
repo=$(mktemp -d)
trap 'rm -rf "$repo"' EXIT

"$python" - "$repo" <<'EOF'
import sys, pathlib
import onnx
from onnx import TensorProto, helper

root = pathlib.Path(sys.argv[1])
graph = helper.make_graph(
    [helper.make_node("GlobalAveragePool", ["input"], ["output"])], "wrap",
    [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 224, 224])],
    [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["N", 3, 1, 1])])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
for name in ("big", "big2"):
    (root / name / "1").mkdir(parents=True)
    onnx.save(model, root / name / "1" / "model.onnx")
    (root / name / "config.yaml").write_text(
        f"name: {name}\nplatform: onnx\nmax_batch_size: 8\n"
        "input:\n  - {name: input, data_type: TYPE_FP32, dims: [3, 224, 224]}\n"
        "output:\n  - {name: output, data_type: TYPE_FP32, dims: [3, 1, 1]}\n"
        "dynamic_batching:\n  max_queue_delay_microseconds: 2000\n")
EOF

for round in $(seq "$rounds"); do
  for share in 0 0.2; do
    echo "== round $round, --spill-share $share"
    "$build/bin/tessera-gpulet-bench" --repository "$repo" --model big:50:8 --model big2:50:8 \
        --devices cpu --input-mirror host --spill-share "$share" --duration-s 3 \
        --concurrency 16 2>/dev/null | grep -E '^\| big|^batches sent|^failed'
  done
done
