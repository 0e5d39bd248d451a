"""Seeded random model folders loaded into a running tessera-server (explicit mode): configs in both
formats with lines dropped, duplicated or given odd values, model files that are truncated,
bit-flipped, random, empty or another model's, odd version folders, and loads, reloads and unloads
of them in random order. Every RepositoryModelLoad/Unload must answer in time with an expected
status and, for an error, a message; a model that loads must answer metadata, config and an
inference (or refuse it with a clear error). A crash, a hang, INTERNAL or UNKNOWN is a finding.
test_repository_fuzz.py runs a CI-sized share; for a long run against a sanitizer build:

  python tests/integration/repository_fuzz.py --url 127.0.0.1:8001 --repository /tmp/models \\
      --cases 500 --seed 3

The repository must be a private copy of configs/models (the fuzzer writes model folders into it)
and the server must run with --model-control-mode explicit on it.
"""

import argparse
import shutil
import sys
from pathlib import Path

import numpy as np
from tritonclient.grpc import service_pb2

from request_fuzz import Finding, FuzzerBase, run_from_command_line

NAMES = ["fz_a", "fz_b", "fz_c"]  # few names, so that reloads and replacements happen
DTYPES = {"FP32": np.float32, "FP64": np.float64, "INT64": np.int64, "INT32": np.int32,
          "INT8": np.int8, "UINT8": np.uint8, "BOOL": np.bool_, "FP16": np.float16}
ODD_VALUES = ["-1", "0", "1", "8", "64", "100000", "99999999999999999999", "1e309", "abc", "[]",
              "{}", "[0]", "[-1]", "[64, 64]", "TYPE_STRING", "TYPE_FP16", "KIND_GPU", "\"\"",
              "null", "~", "true", "&a", "*a", "!!binary AAAA", "'", "\"unterminated", "ensemble",
              "\"ensemble\""]

YAML_CONFIG = """name: {name}
platform: onnx
max_batch_size: 8
input:
  - name: input
    data_type: TYPE_FP32
    dims: [64]
output:
  - name: output
    data_type: TYPE_FP32
    dims: [10]
dynamic_batching:
  max_queue_delay_microseconds: 500
instance_group:
  - count: 1
    kind: KIND_AUTO
slo_ms: 50
"""

PBTXT_CONFIG = """name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [ {{ name: "input", data_type: TYPE_FP32, dims: [ 64 ] }} ]
output [ {{ name: "output", data_type: TYPE_FP32, dims: [ 10 ] }} ]
dynamic_batching {{ max_queue_delay_microseconds: 500 }}
instance_group [ {{ count: 1, kind: KIND_CPU }} ]
parameters {{ key: "slo_ms" value {{ string_value: "50" }} }}
"""


def mutate_lines(rng, text):
    lines = text.splitlines()
    for _ in range(rng.randint(1, 3)):
        i = rng.randrange(len(lines)) if lines else 0
        kind = rng.randrange(6)
        if kind == 0 and lines:
            del lines[i]
        elif kind == 1 and lines:
            lines.insert(i, lines[i])
        elif kind == 2 and lines:
            # Replace the value after the first ':' (a key's value in both formats).
            head, sep, _ = lines[i].partition(":")
            lines[i] = head + sep + " " + rng.choice(ODD_VALUES) if sep else lines[i]
        elif kind == 3:
            lines.insert(i, rng.choice(["unknown_key: 1", "  - name: extra", "\t", "{", "]",
                                        "input [ { name: \"x\" } ]", "dims: [ 0 ]",
                                        "instance_group [ { count: 64, kind: KIND_CPU } ]",
                                        "    reshape: {shape: [8, 8]}", "    reshape: {shape: [64]}",
                                        "    reshape: {shape: [-1]}",
                                        "ensemble_scheduling: {step: [{model_name: mlp, "
                                        "input_map: {input: input}, output_map: {output: output}}]}",
                                        "ensemble_scheduling { step [ { model_name: \"fz_a\" "
                                        "input_map { key: \"input\" value: \"input\" } "
                                        "output_map { key: \"output\" value: \"output\" } } ] }"]))
        elif kind == 4:
            cut = rng.randrange(len(text) + 1)
            return text[:cut]
        else:
            return text + "".join(chr(rng.randrange(1, 0x3000)) for _ in range(rng.randrange(20)))
    return "\n".join(lines) + "\n"


def model_bytes(rng, models):
    good = models[rng.choice(list(models))]
    kind = rng.randrange(7)
    if kind <= 1:
        return good
    if kind == 2:
        return good[:rng.randrange(len(good))]
    if kind == 3:
        data = bytearray(good)
        for _ in range(rng.randint(1, 20)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        return bytes(data)
    if kind == 4:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(2000)))
    if kind == 5:
        return b""
    return good + bytes(rng.randrange(256) for _ in range(64))


class RepositoryFuzzer(FuzzerBase):
    def __init__(self, url, repository, seed, timeout_s=60.0):
        super().__init__(url, seed, timeout_s)
        self.repo = Path(repository)
        self.models = {m: (self.repo / m / "1" / "model.onnx").read_bytes()
                       for m in ("mlp", "small_cnn")}

    def write_model(self, name):
        rng = self.rng
        folder = self.repo / name
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
        fmt = rng.choice(["yaml", "yaml", "pbtxt", "none", "both"])
        yaml_text = YAML_CONFIG.format(name=name)
        pbtxt_text = PBTXT_CONFIG.format(name=name)
        if rng.randrange(3):
            yaml_text, pbtxt_text = mutate_lines(rng, yaml_text), mutate_lines(rng, pbtxt_text)
        if fmt in ("yaml", "both"):
            (folder / "config.yaml").write_text(yaml_text)
        if fmt in ("pbtxt", "both"):
            (folder / "config.pbtxt").write_text(pbtxt_text)
        versions = rng.choices(["1", "1", "1", "2", "0", "-3", "abc", "99999999999999999999"],
                               k=rng.randint(0, 2))
        for version in dict.fromkeys(versions):
            vdir = folder / version
            vdir.mkdir(exist_ok=True)
            if rng.randrange(8):
                (vdir / "model.onnx").write_bytes(model_bytes(rng, self.models))
            elif rng.randrange(2):
                (vdir / "model.onnx").mkdir()
        return fmt

    def exercise(self, name, index):
        """Metadata, config and one inference with inputs shaped as the metadata says."""
        t = self.timeout_s
        meta = self._check(f"case {index} ModelMetadata {name}", lambda: self.stub.ModelMetadata(
            service_pb2.ModelMetadataRequest(name=name), timeout=t))
        self._check(f"case {index} ModelConfig {name}", lambda: self.stub.ModelConfig(
            service_pb2.ModelConfigRequest(name=name), timeout=t))
        if meta is None:
            return
        req = service_pb2.ModelInferRequest(model_name=name)
        for tensor in meta.inputs:
            shape = [1 if d < 0 else d for d in tensor.shape]
            if int(np.prod(shape, dtype=object)) > (1 << 22):
                return
            dtype = DTYPES.get(tensor.datatype)
            if dtype is None:
                return
            req.inputs.add(name=tensor.name, datatype=tensor.datatype, shape=shape)
            req.raw_input_contents.append(np.zeros(shape, dtype=dtype).tobytes())
        resp = self._check(f"case {index} ModelInfer {name}",
                           lambda: self.stub.ModelInfer(req, timeout=t))
        if resp is not None and len(resp.outputs) != len(meta.outputs):
            raise Finding(f"case {index}: {name} answered {len(resp.outputs)} outputs, its "
                          f"metadata lists {len(meta.outputs)}")

    def one_case(self, index):
        rng, t = self.rng, self.timeout_s
        name = rng.choice(NAMES)
        if rng.randrange(4) == 0:
            self._check(f"case {index} RepositoryModelUnload {name}",
                        lambda: self.stub.RepositoryModelUnload(
                            service_pb2.RepositoryModelUnloadRequest(model_name=name), timeout=t))
            return
        fmt = self.write_model(name)
        what = f"case {index} RepositoryModelLoad {name} ({fmt}: " + ", ".join(
            sorted(str(p.relative_to(self.repo)) for p in (self.repo / name).rglob("*"))) + ")"
        if self._check(what, lambda: self.stub.RepositoryModelLoad(
                service_pb2.RepositoryModelLoadRequest(model_name=name), timeout=t)) is not None:
            self.exercise(name, index)
        index_response = self._check(f"case {index} RepositoryIndex", lambda: self.stub.RepositoryIndex(
            service_pb2.RepositoryIndexRequest(), timeout=t))
        for model in index_response.models:
            if model.state not in ("READY", "UNAVAILABLE", "LOADING", "UNLOADING", ""):
                raise Finding(f"case {index}: {model.name} in state {model.state!r}")
            if model.state == "UNAVAILABLE" and model.name in NAMES and not model.reason:
                raise Finding(f"case {index}: {model.name} UNAVAILABLE without a reason")


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--repository", required=True)
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    fuzzer = RepositoryFuzzer(args.url, args.repository, args.seed)
    return run_from_command_line(fuzzer, args.cases, progress_every=100)

if __name__ == "__main__":
    sys.exit(main())
