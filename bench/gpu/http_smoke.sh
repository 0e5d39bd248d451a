#!/usr/bin/env bash
# The HTTP endpoint on a GPU machine from the carried bundle: on 16 cores it runs 4 I/O threads
# (one on the dev VM), and the models serve on the GPU. Checks one client's wait beside 150 stalled
# connections (bench/http/stalled_connections_check.py) and 2,000 curl inferences, 64 at once.
#
#   On the build machine:  TESSERA_GPU_ZOO=/nonexistent scripts/gpu_check_engine.sh bundle build
#   On the GPU machine:    run(carry=["build/gpu-bundle.tar.xz"], command="bash bench/gpu/http_smoke.sh")
set -u
source scripts/gpu_env.sh
tessera_gpu_build "$PWD" build tessera-server
L=$(tessera_gpu_libpath "$BUILD/gpu-bundle"; echo "$LD_LIBRARY_PATH")
mkdir -p /tmp/w
printf '#!/bin/sh\nLD_LIBRARY_PATH="%s" exec "%s" "$@"\n' "$L" "$BIN/tessera-server" > /tmp/w/tessera-server
chmod +x /tmp/w/tessera-server
python3 bench/http/stalled_connections_check.py /tmp/w 18933
/tmp/w/tessera-server --model-repository configs/models --grpc-port 0 --metrics-port 0 --http-port 18934 --model-control-mode none > /tmp/s.log 2>&1 &
P=$!
for i in $(seq 60); do curl -s -o /dev/null -m 1 localhost:18934/v2/health/ready && break; sleep 0.5; done
python3 -c 'import json; print(json.dumps({"inputs":[{"name":"input","shape":[1,64],"datatype":"FP32","data":[0.5]*64}]}))' > /tmp/b.json
echo "2000 requests, 64 at once (curl):"
seq 2000 | xargs -P 64 -I{} curl -s -o /dev/null -w "%{http_code}\n" -X POST --data-binary @/tmp/b.json localhost:18934/v2/models/mlp/infer | sort | uniq -c
curl -s -X POST --data-binary @/tmp/b.json localhost:18934/v2/models/mlp/infer | head -c 200; echo
grep -E "devices|gpu|GPU|HTTP" /tmp/s.log | head -5
kill $P; wait $P
