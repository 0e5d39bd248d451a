#!/usr/bin/env bash
# Builds the model zoo: tools/export_zoo.py (PyTorch: ONNX models, configs, inputs, torch outputs),
# then tools/zoo_reference.py (onnxruntime: the reference outputs, checked against torch's).
#
#   scripts/make_zoo.sh --out DIR [--set ci|full | --models a,b] [--opset N] [--batch N] [--force]
#
# The options go to both tools (see docs/model-zoo.md). Models that are already up to date are
# skipped, so a second run takes a few seconds.
#
# Environment:
#   TESSERA_TORCH_PYTHON=PATH  interpreter with torch + torchvision (default /usr/bin/python3, Debian's
#                              python3-torch; the python3 on PATH may be a pyenv build without it)
#   TESSERA_VENV=DIR           virtualenv with onnxruntime (default <repo>/.venv, made by
#                              scripts/install_deps.sh)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TORCH_PYTHON="${TESSERA_TORCH_PYTHON:-/usr/bin/python3}"
VENV="${TESSERA_VENV:-$REPO/.venv}"

die() { echo "[make_zoo] error: $*" >&2; exit 1; }

[[ -x "$TORCH_PYTHON" ]] || die "$TORCH_PYTHON not found (set TESSERA_TORCH_PYTHON)"
"$TORCH_PYTHON" -c 'import torch, torchvision, onnx' 2>/dev/null \
  || die "$TORCH_PYTHON cannot import torch, torchvision and onnx: install Debian's python3-torch, \
python3-torchvision and python3-onnx (scripts/install_deps.sh does) or set TESSERA_TORCH_PYTHON"
[[ -x "$VENV/bin/python" ]] \
  || die "no virtualenv at $VENV: run scripts/install_deps.sh (or set TESSERA_VENV)"
"$VENV/bin/python" -c 'import onnxruntime, onnx, numpy' 2>/dev/null \
  || die "$VENV/bin/python cannot import onnxruntime: run scripts/install_deps.sh"

"$TORCH_PYTHON" "$REPO/tools/export_zoo.py" "$@"
"$VENV/bin/python" "$REPO/tools/zoo_reference.py" "$@"
