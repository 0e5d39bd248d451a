#!/usr/bin/env bash
# Issue 6 item 2 (frontend overhead) on a GPU machine, from a build carried there: the machines lent
# have 16 cores, so this shows how the gap to the bare grpc++ server changes with more cores than
# the 2-core dev VM; TESSERA_CPUS (a taskset list, e.g. 0,1) pins server, executor and client to
# those cores, the dev VM's core count on that machine's faster cores.
#
#   On the build machine:  scripts/gpu_check_engine.sh bundle build   # -> build/gpu-bundle.tar.xz
#   On the GPU machine, from the repository root:
#     run(carry=["build/gpu-bundle.tar.xz"],
#         command="TESSERA_CPUS=0,1 bench/gpu/frontend_overhead.sh build --devices cpu --channels 4")
#
# Arguments after the build folder go to bench/frontend_overhead.py; the table goes to
# $OUT/frontend-overhead[-cpus<list>].md (or /tmp/...). With --thread-cpu first, they go to
# bench/frontend_thread_cpu.py instead (each thread's CPU under the same load), table in
# $OUT/frontend-thread-cpu[-cpus<list>].md. The bundle's libraries are given to the
# Tessera binaries only (through wrappers), not to python3, which keeps the machine's own libstdc++.
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=scripts/gpu_env.sh
source "$REPO/scripts/gpu_env.sh"
tessera_gpu_build "$REPO" "${1:-}" tessera-bare-server
shift || true
for b in tessera-server tessera-executor tessera-bench tessera-bare-server; do
  [[ -x "$BIN/$b" ]] || { echo "no $b under $BIN (rebuild the bundle)" >&2; exit 1; }
done
tessera_ld=$(TESSERA_REPO="$REPO" tessera_gpu_libpath "$BUILD/gpu-bundle"; echo "$LD_LIBRARY_PATH")

# frontend_overhead.py looks for BUILD/bin/<name>: a folder of wrappers that run the bundle's
# binaries with its libraries. tessera-server finds tessera-executor beside its real path.
wrap=$(mktemp -d /tmp/tessera-fo-wrap-XXXXXX)
mkdir -p "$wrap/bin"
for b in tessera-server tessera-executor tessera-bench tessera-bare-server; do
  printf '#!/bin/sh\nLD_LIBRARY_PATH="%s" exec "%s" "$@"\n' "$tessera_ld" "$BIN/$b" >"$wrap/bin/$b"
  chmod +x "$wrap/bin/$b"
done

LOGS="${OUT:-/tmp}"
mkdir -p "$LOGS"
suffix=""
pin=()
if [[ -n "${TESSERA_CPUS:-}" ]]; then
  suffix="-cpus${TESSERA_CPUS//,/_}"
  pin=(taskset -c "$TESSERA_CPUS")
fi
py=python3
[[ -x "$REPO/.venv/bin/python" ]] && py="$REPO/.venv/bin/python"
what=frontend-overhead
script=frontend_overhead.py
if [[ "${1:-}" == --thread-cpu ]]; then
  shift
  what=frontend-thread-cpu
  script=frontend_thread_cpu.py
fi
echo "== $what, ${TESSERA_CPUS:+cores $TESSERA_CPUS, }$(nproc --all) cores on the machine"
"${pin[@]}" "$py" "$REPO/bench/$script" --build-dir "$wrap" --output "$LOGS/$what$suffix.md" "$@"
status=$?
rm -rf "$wrap"
exit $status
