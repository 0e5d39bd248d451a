#!/usr/bin/env bash
# Makes Triton's perf_analyzer runnable on this machine, for the compatibility test
# (tests/integration/test_perf_analyzer.py) and bench/perf_analyzer_compat.sh.
#
# perf_analyzer ships only as a prebuilt binary inside its PyPI wheel, built against glibc 2.38 and
# libstdc++ 3.4.32 (Ubuntu 24.04); Debian 12 has glibc 2.36. So, on such a machine, the binary is run
# through Debian 13's own loader and libraries (libc6, libstdc++6, libgcc-s1, libssl3t64, zlib1g,
# fetched with apt-get from Debian's archive into a private folder: nothing is installed on the
# system, and nothing else on the machine sees these libraries). Where the system glibc is new
# enough (the GPU machines), the binary runs as it is.
#
#   scripts/fetch_perf_analyzer.sh [DIR]      # default DIR: <repo>/.cache/perf_analyzer
#
# Leaves DIR/bin/perf_analyzer (a wrapper that runs the binary the right way) and prints its path.
# Idempotent: returns at once when DIR already holds this version. Needs PyPI (pip download) and
# deb.debian.org (trixie) on the first run.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${1:-$REPO/.cache/perf_analyzer}"
VERSION=2.60.0
RUNTIME_SUITE=trixie
RUNTIME_PACKAGES=(libc6 libstdc++6 libgcc-s1 libssl3t64 zlib1g)
STAMP="$DIR/.stamp"
WANTED_STAMP="perf_analyzer $VERSION runtime $RUNTIME_SUITE ${RUNTIME_PACKAGES[*]}"

log() { echo "[fetch_perf_analyzer] $*" >&2; }
die() { log "error: $*"; exit 1; }

if [[ -x "$DIR/bin/perf_analyzer" && -f "$STAMP" && "$(cat "$STAMP")" == "$WANTED_STAMP" ]]; then
  echo "$DIR/bin/perf_analyzer"
  exit 0
fi
rm -rf "$DIR"
mkdir -p "$DIR/bin" "$DIR/download"

# ---- the wheel (any Python: the wheel is py3-none; only the binary inside is used) ---------------
PIP=(python3 -m pip)
[[ -x "$REPO/.venv/bin/python" ]] && PIP=("$REPO/.venv/bin/python" -m pip)
PIP_DISABLE_PIP_VERSION_CHECK=1 "${PIP[@]}" download -q "perf-analyzer==$VERSION" --no-deps \
  --only-binary=:all: --platform manylinux_2_38_x86_64 --python-version 3.12 -d "$DIR/download" \
  || die "pip could not download perf-analyzer==$VERSION (PyPI unreachable?)"
wheel="$(ls "$DIR"/download/perf_analyzer-"$VERSION"-*.whl 2>/dev/null | head -n1)"
[[ -n "$wheel" ]] || die "no perf_analyzer-$VERSION wheel in $DIR/download"
python3 -m zipfile -e "$wheel" "$DIR/wheel" || die "cannot unpack $wheel"
BINARY="$DIR/wheel/perf_analyzer/bin/perf_analyzer"
[[ -f "$BINARY" ]] || die "$wheel holds no perf_analyzer/bin/perf_analyzer"
chmod +x "$BINARY"

# ---- the C runtime it needs --------------------------------------------------------------------
glibc="$(getconf GNU_LIBC_VERSION | awk '{print $2}')"
if [[ "$(printf '%s\n2.38\n' "$glibc" | sort -V | head -n1)" == 2.38 ]] && "$BINARY" --version >/dev/null 2>&1; then
  log "glibc $glibc runs perf_analyzer as it is"
  cat >"$DIR/bin/perf_analyzer" <<EOF
#!/bin/sh
exec "$BINARY" "\$@"
EOF
else
  log "glibc $glibc < 2.38: fetching Debian $RUNTIME_SUITE's C and C++ runtime for perf_analyzer alone"
  command -v apt-get >/dev/null || die "no apt-get: cannot fetch a glibc >= 2.38 runtime on this machine"
  APT_DIR="$DIR/apt"
  mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/archives/partial" "$DIR/runtime"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $RUNTIME_SUITE main" \
    >"$APT_DIR/sources.list"
  # A private package index: the system's sources, lists and installed packages are left alone.
  apt_opts=(-o "Dir::Etc::SourceList=$APT_DIR/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
            -o "Dir::State::Lists=$APT_DIR/lists" -o "Dir::Cache::Archives=$APT_DIR/archives"
            -o "Dir::State::status=/dev/null" -o "APT::Sandbox::User=root" -q)
  apt-get "${apt_opts[@]}" update >/dev/null || die "apt-get update of Debian $RUNTIME_SUITE failed"
  (cd "$APT_DIR/archives" && apt-get "${apt_opts[@]}" download "${RUNTIME_PACKAGES[@]}" >/dev/null) \
    || die "apt-get download ${RUNTIME_PACKAGES[*]} ($RUNTIME_SUITE) failed"
  for deb in "$APT_DIR"/archives/*.deb; do dpkg-deb -x "$deb" "$DIR/runtime"; done
  rm -rf "$APT_DIR"
  LOADER="$DIR/runtime/usr/lib64/ld-linux-x86-64.so.2"
  [[ -x "$LOADER" ]] || die "no loader at $LOADER after unpacking ${RUNTIME_PACKAGES[*]}"
  # The loader run as a program: the binary and only the binary gets the newer libraries.
  cat >"$DIR/bin/perf_analyzer" <<EOF
#!/bin/sh
exec "$LOADER" --library-path "$DIR/runtime/usr/lib/x86_64-linux-gnu" "$BINARY" "\$@"
EOF
fi
chmod +x "$DIR/bin/perf_analyzer"
rm -rf "$DIR/download"
"$DIR/bin/perf_analyzer" --version >/dev/null 2>&1 \
  || { "$DIR/bin/perf_analyzer" --version >&2 || true; die "perf_analyzer does not start (see above)"; }
echo "$WANTED_STAMP" >"$STAMP"
echo "$DIR/bin/perf_analyzer"
