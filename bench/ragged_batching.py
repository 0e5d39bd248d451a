#!/usr/bin/env python3
"""Ragged batching against padding: requests of 1..--max-tokens tokens to one per-token model,
served two ways by one tessera-server in the same run.

- ragged: the model takes the batch's tokens flat (allow_ragged_batch) and a BATCH_ITEM_SHAPE
  batch input that says how many tokens each request has;
- padded (the peer, what a client does without ragged batching): each request is padded to
  --max-tokens with zeros and carries its length; the model runs every padded token and masks the
  padding out of its mean.

Both compute, per request, the mean over its tokens of a two-layer MLP (256 -> --hidden -> 256,
ReLU) applied to each token, with the same weights; the script checks that they agree. Closed loop,
--concurrency client threads (tritonclient gRPC), the two models alternated --repeats times; the
table gives the medians and ragged / padded ratios.

Usage: .venv/bin/python bench/ragged_batching.py [--duration-s 5] [--output table.md]
"""
import argparse
import statistics
import threading
import time

import numpy as np
import onnx
import tritonclient.grpc as grpcclient
from onnx import TensorProto, helper, numpy_helper

import benchlib

WIDTH = 256


def mlp_nodes(source, weights):
    """Nodes of the per-token MLP on `source` ([..., WIDTH]) into "hidden_out"."""
    return [helper.make_node("MatMul", [source, "w1"], ["h1"]),
            helper.make_node("Add", ["h1", "b1"], ["h1b"]),
            helper.make_node("Relu", ["h1b"], ["h1r"]),
            helper.make_node("MatMul", ["h1r", "w2"], ["h2"]),
            helper.make_node("Add", ["h2", "b2"], ["hidden_out"])], [
        numpy_helper.from_array(w, n) for n, w in weights.items()]


def save(model_dir, graph, config):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    (model_dir / "1").mkdir(parents=True)
    onnx.save(model, str(model_dir / "1" / "model.onnx"))
    (model_dir / "config.pbtxt").write_text(config)


def write_models(repo, weights, max_tokens, max_batch, delay_us):
    i64 = TensorProto.INT64
    ints = lambda name, v: helper.make_tensor(name, i64, [len(v)], v)  # noqa: E731
    batching = f"dynamic_batching {{ max_queue_delay_microseconds: {delay_us} }}\n"

    # Ragged: TOKENS flat [T * WIDTH]; ITEM_SHAPE [N, 2] = (tokens, WIDTH) per request.
    nodes, inits = mlp_nodes("tokens", weights)
    nodes = [helper.make_node("Reshape", ["TOKENS", "rows_of_width"], ["tokens"])] + nodes + [
        helper.make_node("CumSum", ["hidden_out", "axis0"], ["running"]),
        helper.make_node("Concat", ["zero_row", "running"], ["prefix"], axis=0),
        helper.make_node("Gather", ["ITEM_SHAPE", "axis0"], ["lengths_col"], axis=1),
        helper.make_node("CumSum", ["lengths_col", "axis0"], ["ends"]),
        helper.make_node("Sub", ["ends", "lengths_col"], ["starts"]),
        helper.make_node("Gather", ["prefix", "ends"], ["upto_end"], axis=0),
        helper.make_node("Gather", ["prefix", "starts"], ["upto_start"], axis=0),
        helper.make_node("Sub", ["upto_end", "upto_start"], ["sums"]),
        helper.make_node("Cast", ["lengths_col"], ["lengths"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["lengths", "axis1"], ["lengths_2d"]),
        helper.make_node("Div", ["sums", "lengths_2d"], ["POOLED"])]
    inits += [ints("rows_of_width", [-1, WIDTH]), helper.make_tensor("axis0", i64, [], [0]),
              ints("axis1", [1]),
              numpy_helper.from_array(np.zeros((1, WIDTH), np.float32), "zero_row")]
    graph = helper.make_graph(
        nodes, "ragged",
        [helper.make_tensor_value_info("TOKENS", TensorProto.FLOAT, ["elements"]),
         helper.make_tensor_value_info("ITEM_SHAPE", i64, ["requests", 2])],
        [helper.make_tensor_value_info("POOLED", TensorProto.FLOAT, ["requests", WIDTH])], inits)
    save(repo / "ragged", graph, f"""name: "ragged"
max_batch_size: {max_batch}
input [ {{ name: "TOKENS" data_type: TYPE_FP32 dims: [ -1, {WIDTH} ] allow_ragged_batch: true }} ]
batch_input [ {{ kind: BATCH_ITEM_SHAPE target_name: "ITEM_SHAPE" data_type: TYPE_INT64
                source_input: "TOKENS" }} ]
output [ {{ name: "POOLED" data_type: TYPE_FP32 dims: [ {WIDTH} ] }} ]
{batching}""")

    # Padded: TOKENS [N, max_tokens, WIDTH], LENGTH [N, 1]; padding masked out of the mean.
    nodes, inits = mlp_nodes("TOKENS", weights)
    nodes += [helper.make_node("Unsqueeze", ["LENGTH", "axis2"], ["length_3d"]),
              helper.make_node("Less", ["positions", "length_3d"], ["valid"]),
              helper.make_node("Cast", ["valid"], ["mask"], to=TensorProto.FLOAT),
              helper.make_node("Mul", ["hidden_out", "mask"], ["kept"]),
              helper.make_node("ReduceSum", ["kept", "token_axis"], ["sums"], keepdims=0),
              helper.make_node("Div", ["sums", "LENGTH"], ["POOLED"])]
    inits += [ints("axis2", [2]), ints("token_axis", [1]), numpy_helper.from_array(
        np.arange(max_tokens, dtype=np.float32).reshape(1, max_tokens, 1), "positions")]
    graph = helper.make_graph(
        nodes, "padded",
        [helper.make_tensor_value_info("TOKENS", TensorProto.FLOAT, ["n", max_tokens, WIDTH]),
         helper.make_tensor_value_info("LENGTH", TensorProto.FLOAT, ["n", 1])],
        [helper.make_tensor_value_info("POOLED", TensorProto.FLOAT, ["n", WIDTH])], inits)
    save(repo / "padded", graph, f"""name: "padded"
max_batch_size: {max_batch}
input [ {{ name: "TOKENS" data_type: TYPE_FP32 dims: [ {max_tokens}, {WIDTH} ] }},
        {{ name: "LENGTH" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "POOLED" data_type: TYPE_FP32 dims: [ {WIDTH} ] }} ]
{batching}""")


def request_inputs(model, tokens, max_tokens):
    if model == "ragged":
        x = grpcclient.InferInput("TOKENS", [1, len(tokens), WIDTH], "FP32")
        x.set_data_from_numpy(tokens[None])
        return [x]
    padded = np.zeros((1, max_tokens, WIDTH), np.float32)
    padded[0, :len(tokens)] = tokens
    x = grpcclient.InferInput("TOKENS", list(padded.shape), "FP32")
    x.set_data_from_numpy(padded)
    length = grpcclient.InferInput("LENGTH", [1, 1], "FP32")
    length.set_data_from_numpy(np.array([[len(tokens)]], np.float32))
    return [x, length]


def closed_loop(url, model, args, seed):
    """Throughput and latencies of `args.concurrency` threads, each sending one request at a time
    for args.duration_s seconds (after args.warmup_s), lengths uniform in 1..max_tokens."""
    latencies, counts, errors = [], [0], []
    lock = threading.Lock()
    start = time.monotonic()
    measure_from, stop_at = start + args.warmup_s, start + args.warmup_s + args.duration_s

    def worker(k):
        client = grpcclient.InferenceServerClient(url)
        rng = np.random.default_rng(seed * 1000 + k)
        while True:
            n = int(rng.integers(1, args.max_tokens + 1))
            tokens = rng.standard_normal((n, WIDTH), dtype=np.float32)
            inputs = request_inputs(model, tokens, args.max_tokens)
            t0 = time.monotonic()
            if t0 >= stop_at:
                return
            try:
                client.infer(model, inputs)
            except Exception as e:  # noqa: BLE001 - counted and reported, never hidden
                with lock:
                    errors.append(str(e))
                return
            t1 = time.monotonic()
            if t0 >= measure_from and t1 <= stop_at:
                with lock:
                    latencies.append(t1 - t0)
                    counts[0] += 1

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(args.concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        benchlib.die(f"{model}: {len(errors)} request(s) failed, first: {errors[0]}")
    latencies.sort()
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1e3  # noqa
    return {"rps": counts[0] / args.duration_s, "p50": pick(0.5), "p99": pick(0.99)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", default=str(benchlib.REPO / "build"))
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--max-batch", type=int, default=16)
    parser.add_argument("--queue-delay-us", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--duration-s", type=float, default=5)
    parser.add_argument("--warmup-s", type=float, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--devices", choices=["auto", "cpu", "gpu"], default="auto")
    parser.add_argument("--output", help="also write the table (markdown) here")
    args = parser.parse_args()

    work = benchlib.temp_dir("tessera-ragged-")
    rng = np.random.default_rng(7)
    weights = {"w1": (rng.standard_normal((WIDTH, args.hidden)) / 16).astype(np.float32),
               "b1": (rng.standard_normal(args.hidden) / 16).astype(np.float32),
               "w2": (rng.standard_normal((args.hidden, WIDTH)) / 32).astype(np.float32),
               "b2": (rng.standard_normal(WIDTH) / 16).astype(np.float32)}
    write_models(work / "models", weights, args.max_tokens, args.max_batch, args.queue_delay_us)
    (work / "server.yaml").write_text(f"executors:\n  devices: {args.devices}\n")
    port = benchlib.free_port()
    benchlib.find_bin(args.build_dir, "tessera-executor")
    server = benchlib.Server("tessera-server", [
        benchlib.find_bin(args.build_dir, "tessera-server"), "--model-repository",
        work / "models", "--grpc-port", port, "--metrics-port", "0", "--http-port", "-1",
        "--model-control-mode", "none", "--config", work / "server.yaml"], work).start()
    url = f"127.0.0.1:{port}"
    try:
        client = grpcclient.InferenceServerClient(url)
        deadline = time.monotonic() + 60
        while True:
            server.check_alive()
            try:
                if all(client.is_model_ready(m) for m in ("ragged", "padded")):
                    break
            except grpcclient.InferenceServerException:
                pass  # not listening yet
            if time.monotonic() > deadline:
                benchlib.die(f"models not ready after 60 s; log {server.log_path}")
            time.sleep(0.5)
        # Both ways give the same answer (float sums in another order: a tolerance).
        tokens = rng.standard_normal((37, WIDTH), dtype=np.float32)
        answers = [client.infer(m, request_inputs(m, tokens, args.max_tokens)).as_numpy("POOLED")
                   for m in ("ragged", "padded")]
        np.testing.assert_allclose(answers[0], answers[1], rtol=1e-4, atol=1e-4)

        runs = {"ragged": [], "padded": []}
        for repeat in range(args.repeats):
            for model in ("ragged", "padded"):
                runs[model].append(closed_loop(url, model, args, repeat))
                print(f"  {model} run {repeat + 1}: {runs[model][-1]['rps']:.1f} req/s", flush=True)
        stats = client.get_inference_statistics(as_json=True)["model_stats"]
    finally:
        server.stop()

    med = {m: {k: statistics.median(r[k] for r in runs[m]) for k in ("rps", "p50", "p99")}
           for m in runs}
    batch = {s["name"]: int(s["inference_count"]) / max(1, int(s["execution_count"]))
             for s in stats}
    # The model's run time of a request's batch (the statistics extension's compute_infer, which
    # counts each request with its batch's run), averaged over the requests.
    infer_ms = {s["name"]: int(s["inference_stats"]["compute_infer"]["ns"]) / 1e6
                / max(1, int(s["inference_stats"]["compute_infer"]["count"])) for s in stats}
    lines = [
        f"# Ragged batching vs padding ({benchlib.today()}, commit {benchlib.commit_id()})",
        "",
        f"- Machine: {benchlib.machine_description()}; executors.devices: {args.devices}.",
        f"- Requests of 1..{args.max_tokens} tokens (uniform) of {WIDTH} FP32 each; per token a "
        f"{WIDTH}-{args.hidden}-{WIDTH} ReLU MLP, mean over the request's tokens. max_batch_size "
        f"{args.max_batch}, max_queue_delay {args.queue_delay_us} µs, 1 instance each.",
        f"- Closed loop: {args.concurrency} tritonclient gRPC threads, {args.duration_s} s "
        f"measured per run after {args.warmup_s} s, {args.repeats} runs each, alternated; "
        "medians.",
        f"- Command: `.venv/bin/python bench/ragged_batching.py --duration-s {args.duration_s} "
        f"--repeats {args.repeats} --concurrency {args.concurrency} --devices {args.devices}`",
        "",
        "| model | req/s | p50 ms | p99 ms | mean batch (requests) | batch run ms |",
        "|---|---|---|---|---|---|",
    ]
    for m in ("ragged", "padded"):
        lines.append(f"| {m} | {med[m]['rps']:.1f} | {med[m]['p50']:.2f} | {med[m]['p99']:.2f} | "
                     f"{batch.get(m, 0):.2f} | {infer_ms.get(m, 0):.3f} |")
    lines += ["", f"ragged / padded: throughput {med['ragged']['rps'] / med['padded']['rps']:.2f}×,"
              f" p50 {med['ragged']['p50'] / med['padded']['p50']:.2f}×,"
              f" p99 {med['ragged']['p99'] / med['padded']['p99']:.2f}×"]
    benchlib.emit(lines, args.output)


if __name__ == "__main__":
    main()
