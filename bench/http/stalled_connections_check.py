#!/usr/bin/env python3
"""How long an HTTP client waits for an answer while 150 other connections stall: a third send
nothing, a third stop inside their headers, a third inside a body they declared. Starts
tessera-server from BIN_DIR on the bundled models (default config) and prints the first answer's
wait and the next 20 answers' mean.

Usage (repository root): .venv/bin/python bench/http/stalled_connections_check.py BIN_DIR PORT
"""
import socket, subprocess, sys, time, urllib.request, json
bin_dir, port = sys.argv[1], int(sys.argv[2])
srv = subprocess.Popen([f"{bin_dir}/tessera-server", "--model-repository", "configs/models", "--grpc-port", "0",
                        "--metrics-port", "0", "--http-port", str(port), "--model-control-mode", "none"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
body = json.dumps({"inputs": [{"name": "input", "shape": [1, 64], "datatype": "FP32", "data": [0.5] * 64}]}).encode()
def infer():
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v2/models/mlp/infer", data=body, method="POST")
    with urllib.request.urlopen(req, timeout=90) as r:
        return r.status
try:
    for _ in range(100):
        try:
            infer(); break
        except Exception:
            time.sleep(0.3)
    held = []
    for i in range(150):
        s = socket.create_connection(("127.0.0.1", port))
        if i % 3 == 1: s.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Ty")
        if i % 3 == 2: s.sendall(b"POST /v2/models/mlp/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{")
        held.append(s)
    time.sleep(0.5)
    t = time.monotonic(); status = infer(); first = time.monotonic() - t
    t = time.monotonic()
    for _ in range(20): infer()
    rest = (time.monotonic() - t) / 20
    print(f"{bin_dir}: with 150 stalled connections (default config, http.threads 64): first answer {first:.3f} s (status {status}), next 20: {rest*1000:.1f} ms each")
finally:
    srv.terminate(); srv.wait()
