#!/usr/bin/env bash
# Issue 5 item 8 on a GPU machine: which partition mechanisms the machine has (MPS, green
# contexts); tessera-server itself with `executors.devices: gpu` serving the bundled models under a
# short tessera-bench load (zero errors); then two models in gpulets of different sizes on GPU 0 with tessera-gpulet-bench
# (bench/gpulet/): each alone vs both together (isolation; GSLICE reports <= 3 % slowdown) and a
# live resize of one gpulet under load (switch gap, drain, failed requests), once per mechanism
# that works.
#
#   On the build machine (full build with TESSERA_CUDA, the default):
#     scripts/gpu_check_engine.sh bundle build     # -> build/gpu-bundle.tar.xz (executor included)
#   On the GPU machine (device tool), from the repository root:
#     run(carry=["build/gpu-bundle.tar.xz"], command="bench/gpu/gpulet_isolation.sh build")
#
# Models: ResNet-50 and BERT-base (seq 128), exported as FP32 ONNX by bench/gpu/engine_vs_torch.py
# (--flops-only: no timing) with the machine's python3 and torch, served FP16 by the CUDA backend.
# Environment: TESSERA_GPULET_MODELS (default "resnet50:60:8 bert_base:40:8", NAME:PCT:BATCH per
# gpulet), TESSERA_GPULET_SECONDS (per phase, default 10), TESSERA_GPULET_MECHANISMS (default
# "green mps"; "mps" has Tessera start its own daemon, "mps-running" starts one here first at the
# default pipe directory, as an administrator would, and Tessera uses it), TESSERA_GPULET_AB
# (default "mirror-off spill-off": the first mechanism that works runs again once per variant,
# with --input-mirror off, the A/B for the GPU-resident input pool, and with --spill-share 0, the
# A/B for the input pool's spill areas; "" for none). Output: $OUT/tessera-gpulet/ (or /tmp/...):
# gpulet-<mechanism>[-<variant>].{txt,json}, the exports' log, and facts.txt. Exit status 0 when at
# least one mechanism ran with no failed request.
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=scripts/gpu_env.sh
source "$REPO/scripts/gpu_env.sh"
tessera_gpu_build "$REPO" "${1:-}" tessera-gpulet-bench
if [[ ! -x "$BIN/tessera-gpulet-bench" || ! -x "$BIN/tessera-executor" ]]; then
  echo "no tessera-gpulet-bench and tessera-executor under $BUILD/gpu-bundle/bin or $BUILD/bin" >&2
  exit 1
fi
LOGS="${TESSERA_GPU_LOG_DIR:-${OUT:-/tmp}/tessera-gpulet}"
mkdir -p "$LOGS"
MODELS="${TESSERA_GPULET_MODELS:-resnet50:60:8 bert_base:40:8}"
SECONDS_PER_PHASE="${TESSERA_GPULET_SECONDS:-10}"
MECHANISMS="${TESSERA_GPULET_MECHANISMS:-green mps}"
# TESSERA_GPULET_MIRROR_AB=0 (the older switch) drops the mirror A/B from the default list.
AB_DEFAULT="mirror-off spill-off"
[[ "${TESSERA_GPULET_MIRROR_AB:-1}" == 0 ]] && AB_DEFAULT="spill-off"
AB_VARIANTS="${TESSERA_GPULET_AB:-$AB_DEFAULT}"

echo "== machine" | tee "$LOGS/facts.txt"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,compute_mode --format=csv,noheader 2>&1
  echo "nvidia-cuda-mps-control: $(command -v nvidia-cuda-mps-control || echo 'not on PATH')"
  echo "CUDA_MPS_PIPE_DIRECTORY=${CUDA_MPS_PIPE_DIRECTORY:-} (a running daemon answers at" \
       "${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}/control: $(
         [[ -S "${CUDA_MPS_PIPE_DIRECTORY:-/tmp/nvidia-mps}/control" ]] && echo yes || echo no))"
} 2>&1 | tee -a "$LOGS/facts.txt"

# First the whole server on the GPU: tessera-server with `executors.devices: gpu` on the bundled
# repository, tessera-bench closed loop against each model (any error fails the step).
if [[ -x "$BIN/tessera-server" && -x "$BIN/tessera-bench" ]]; then
  echo "== tessera-server on the GPU, bundled models (log: $LOGS/server-gpu.log)"
  printf 'executors:\n  devices: gpu\n' >"$LOGS/server-gpu.yaml"
  # The bundle's libraries for the Tessera processes only (python3 keeps the machine's own).
  tessera_ld=$(TESSERA_REPO="$REPO" tessera_gpu_libpath "$BUILD/gpu-bundle"; echo "$LD_LIBRARY_PATH")
  port=$(tessera_free_port)
  env LD_LIBRARY_PATH="$tessera_ld" \
    "$BIN/tessera-server" --config "$LOGS/server-gpu.yaml" --model-repository "$REPO/configs/models" \
    --grpc-port "$port" --metrics-port 0 --http-port -1 --model-control-mode none >"$LOGS/server-gpu.log" 2>&1 &
  server_pid=$!
  server_ok=0
  for model in mlp small_cnn; do
    for _ in $(seq 1 60); do
      kill -0 "$server_pid" 2>/dev/null || break
      if env LD_LIBRARY_PATH="$tessera_ld" \
           "$BIN/tessera-bench" -u "127.0.0.1:$port" -m "$model" --concurrency-range 1 \
           --warmup-s 0 --duration-s 0.05 --progress off --fail-on-error >/dev/null 2>&1; then
        server_ok=$((server_ok + 1)); break
      fi
      sleep 1
    done
  done
  if [[ $server_ok -eq 2 ]]; then
    env LD_LIBRARY_PATH="$tessera_ld" \
      "$BIN/tessera-bench" -u "127.0.0.1:$port" -m mlp -m small_cnn --concurrency-range 8 \
      --warmup-s 1 --duration-s 3 --progress off --fail-on-error 2>&1 | tee "$LOGS/server-gpu-bench.txt"
    echo "server on the GPU: bench exit ${PIPESTATUS[0]}"
  else
    echo "server on the GPU: models not ready; last log lines:"
    tail -20 "$LOGS/server-gpu.log"
  fi
  kill -TERM "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null
  grep -E " [EW] \[" "$LOGS/server-gpu.log" | head -10
fi

# The models: exported with the python that has torch, under the machine's own library path.
py=""
for cand in /usr/bin/python3 python3; do
  if "$cand" -c 'import torch, onnx' 2>/dev/null; then py="$cand"; break; fi
done
[[ -n "$py" ]] || { echo "no python3 with torch and onnx here" >&2; exit 1; }
ZOO=/tmp/zoo-gpu
names=$(for spec in $MODELS; do echo "${spec%%:*}"; done | paste -sd, -)
echo "== exporting $names into $ZOO (log: $LOGS/export.log)"
"$py" "$REPO/bench/gpu/engine_vs_torch.py" --flops-only --models "$names" --zoo "$ZOO" \
  >"$LOGS/export.log" 2>&1 || { tail -20 "$LOGS/export.log"; exit 1; }

# A repository of FP16 models with fixed shapes (the bench feeds one row per request).
REPOSITORY="$LOGS/repository"
rm -rf "$REPOSITORY"
for name in ${names//,/ }; do
  mkdir -p "$REPOSITORY/$name/1"
  ln -s "$ZOO/$name/model-opset17.onnx" "$REPOSITORY/$name/1/model.onnx"
  case "$name" in
    resnet50)
      io='input:
  - {name: input, data_type: TYPE_FP32, dims: [3, 224, 224]}
output:
  - {name: output, data_type: TYPE_FP32, dims: [1000]}' ;;
    bert_base)
      io='input:
  - {name: input_ids, data_type: TYPE_INT64, dims: [128]}
  - {name: attention_mask, data_type: TYPE_INT64, dims: [128]}
output:
  - {name: last_hidden_state, data_type: TYPE_FP32, dims: [128, 768]}
  - {name: pooler_output, data_type: TYPE_FP32, dims: [768]}' ;;
    *) echo "no config for model '$name' in this script" >&2; exit 1 ;;
  esac
  cat >"$REPOSITORY/$name/config.yaml" <<YAML
name: $name
platform: onnx
max_batch_size: 32
$io
instance_group:
  - {count: 1, kind: KIND_GPU}
precision: fp16
YAML
done

TESSERA_REPO="$REPO" tessera_gpu_libpath "$BUILD/gpu-bundle"
model_args=()
for spec in $MODELS; do model_args+=(--model "$spec"); done
ok=0
for mechanism in $MECHANISMS; do
  extra=()
  tessera_mechanism="$mechanism"
  [[ "$mechanism" == mps ]] && extra+=(--mps-start-daemon)
  if [[ "$mechanism" == mps-running ]]; then
    # MPS with a daemon an administrator started (the default pipe directory), not Tessera.
    tessera_mechanism=mps
    mkdir -p /tmp/nvidia-mps /tmp/nvidia-log
    env LD_LIBRARY_PATH="$ORIG_LD_LIBRARY_PATH" nvidia-cuda-mps-control -d
    sleep 2
  fi
  echo "== $mechanism (log: $LOGS/gpulet-$mechanism.txt)"
  timeout -k 10 400 "$BIN/tessera-gpulet-bench" --executor "$BIN/tessera-executor" \
    --repository "$REPOSITORY" "${model_args[@]}" --devices gpu --mechanism "$tessera_mechanism" \
    "${extra[@]}" --duration-s "$SECONDS_PER_PHASE" --json "$LOGS/gpulet-$mechanism.json" \
    >"$LOGS/gpulet-$mechanism.txt" 2>&1
  rc=$?
  if [[ "$mechanism" == mps-running ]]; then
    echo quit | env LD_LIBRARY_PATH="$ORIG_LD_LIBRARY_PATH" nvidia-cuda-mps-control
  fi
  grep -vE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T' "$LOGS/gpulet-$mechanism.txt"
  grep -E ' [EW] \[' "$LOGS/gpulet-$mechanism.txt" | head -20
  echo "$mechanism: exit $rc"
  grep -hE "batch inputs read from the input mirror|maps weights another executor|loaded its own weights" \
    "$LOGS/gpulet-$mechanism.txt" | head -10
  if [[ $rc -eq 0 && $ok -eq 0 && "$mechanism" != mps-running ]]; then
    # The same run with one feature off, for each A/B asked for.
    for variant in $AB_VARIANTS; do
      case "$variant" in
        mirror-off) variant_args=(--input-mirror off) ;;  # executors.input_mirror
        spill-off) variant_args=(--spill-share 0) ;;     # the input pool's spill areas
        *) echo "unknown A/B variant '$variant'"; continue ;;
      esac
      echo "== $mechanism, $variant (log: $LOGS/gpulet-$mechanism-$variant.txt)"
      timeout -k 10 400 "$BIN/tessera-gpulet-bench" --executor "$BIN/tessera-executor" \
        --repository "$REPOSITORY" "${model_args[@]}" --devices gpu --mechanism "$tessera_mechanism" \
        "${extra[@]}" --duration-s "$SECONDS_PER_PHASE" "${variant_args[@]}" \
        --json "$LOGS/gpulet-$mechanism-$variant.json" >"$LOGS/gpulet-$mechanism-$variant.txt" 2>&1
      echo "$mechanism, $variant: exit $?"
      grep -vE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T' "$LOGS/gpulet-$mechanism-$variant.txt" | head -30
    done
  fi
  [[ $rc -eq 0 ]] && ok=1
done
[[ $ok -eq 1 ]]
