#!/usr/bin/env bash
# Installs everything Tessera needs to build, test and serve on Debian 12:
#   1. the Debian packages below (apt-get update runs only when one is missing);
#   2. a virtualenv at <repo>/.venv, made from Debian's /usr/bin/python3, holding the Python packages
#      of tools/requirements-dev.txt (pip runs only when that list changed since the last install);
#   3. Triton's perf_analyzer, for the compatibility test (scripts/fetch_perf_analyzer.sh: its PyPI
#      wheel, and on Debian 12 Debian 13's C runtime beside it; once, into <repo>/.cache).
# Idempotent and non-interactive: runs as root directly, otherwise through sudo. When everything is
# already there it takes well under 5 s.
#
# Environment:
#   TESSERA_SKIP_APT=1   skip the Debian package step (e.g. a machine where someone else manages them)
#   TESSERA_VENV=DIR     put the virtualenv elsewhere (default <repo>/.venv)
#   TESSERA_SKIP_PERF_ANALYZER=1   skip step 3 (integration_tritonclient_perf_analyzer then fails)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${TESSERA_VENV:-$REPO/.venv}"
REQUIREMENTS="$REPO/tools/requirements-dev.txt"
STAMP="$VENV/.tessera-requirements.stamp"
# Debian's interpreter on purpose: the python3 first on PATH on the dev machines is a pyenv build.
BASE_PYTHON=/usr/bin/python3

# ocl-icd-opencl-dev: Debian's dnnl-config.cmake requires OpenCL (oneDNN's GPU runtime), and
# libdnnl-dev only recommends it, which --no-install-recommends skips.
APT_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  libspdlog-dev libyaml-cpp-dev libcli11-dev prometheus-cpp-dev libeigen3-dev
  libcivetweb-dev libmicrohttpd-dev libgnutls28-dev nlohmann-json3-dev zlib1g-dev libssl-dev openssl
  libcurl4-openssl-dev
  libonnx-dev libonnx-testdata libdnnl-dev ocl-icd-opencl-dev libgoogle-perftools-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-venv python3-numpy python3-onnx python3-torch python3-torchvision
  curl
)

log() { echo "[install_deps] $*" >&2; }
die() { log "error: $*"; exit 1; }

# Two scripts (test.sh, serve.sh) may run this at once: serialize on this file.
exec 9<"${BASH_SOURCE[0]}"
if command -v flock >/dev/null 2>&1; then flock 9; fi

# ---- 1. Debian packages --------------------------------------------------------------------------
as_root() {
  if [[ "$(id -u)" -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    if [[ -t 0 ]]; then sudo "$@"; else sudo -n "$@"; fi
  else
    die "not root and no sudo: cannot run '$*'"
  fi
}

missing_apt_packages() {
  # One dpkg-query for all packages; unknown packages print nothing on stdout.
  local installed
  installed="$(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' "${APT_PACKAGES[@]}" 2>/dev/null || true)"
  local p
  for p in "${APT_PACKAGES[@]}"; do
    if ! grep -q "^${p} ii" <<<"$installed"; then echo "$p"; fi
  done
}

if [[ "${TESSERA_SKIP_APT:-0}" != 1 ]]; then
  command -v dpkg-query >/dev/null 2>&1 || die "dpkg-query not found: this script targets Debian 12"
  mapfile -t MISSING < <(missing_apt_packages)
  if ((${#MISSING[@]} > 0)); then
    log "installing Debian packages: ${MISSING[*]}"
    export DEBIAN_FRONTEND=noninteractive
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${MISSING[@]}"
    mapfile -t STILL_MISSING < <(missing_apt_packages)
    ((${#STILL_MISSING[@]} == 0)) || die "still missing after apt-get install: ${STILL_MISSING[*]}"
  fi
fi

# ---- 2. Python virtualenv ------------------------------------------------------------------------
[[ -x "$BASE_PYTHON" ]] || die "$BASE_PYTHON not found (Debian's python3)"
[[ -f "$REQUIREMENTS" ]] || die "$REQUIREMENTS not found"

venv_ok() {
  # Exists, was made from /usr/bin, and its interpreter still starts.
  [[ -x "$VENV/bin/python" && -f "$VENV/pyvenv.cfg" ]] || return 1
  grep -qx 'home = /usr/bin' "$VENV/pyvenv.cfg" || return 1
  "$VENV/bin/python" -c '' 2>/dev/null
}

if ! venv_ok; then
  log "creating virtualenv $VENV from $BASE_PYTHON"
  rm -rf "$VENV"
  "$BASE_PYTHON" -m venv "$VENV" || die "could not create $VENV (is python3-venv installed?)"
fi

# The stamp holds the requirement list and the interpreter version it was installed for.
wanted_stamp() {
  "$VENV/bin/python" -c 'import sys; print("python", sys.version.split()[0])'
  cat "$REQUIREMENTS"
}
if ! [[ -f "$STAMP" ]] || ! cmp -s <(wanted_stamp) "$STAMP"; then
  log "installing Python packages from $REQUIREMENTS"
  rm -f "$STAMP"
  PIP_DISABLE_PIP_VERSION_CHECK=1 "$VENV/bin/python" -m pip install --no-input -q -r "$REQUIREMENTS" \
    || die "pip install failed (PyPI unreachable?)"
  "$VENV/bin/python" -c 'import tritonclient.grpc, tritonclient.grpc.service_pb2_grpc, onnx, onnxruntime, numpy, pytest' \
    || die "the virtualenv does not import the test packages"
  wanted_stamp >"$STAMP"
fi

# ---- 3. perf_analyzer ----------------------------------------------------------------------------
if [[ "${TESSERA_SKIP_PERF_ANALYZER:-0}" != 1 ]]; then
  "$REPO/scripts/fetch_perf_analyzer.sh" >/dev/null || die "could not fetch perf_analyzer"
fi

log "ok (venv: $VENV)"
