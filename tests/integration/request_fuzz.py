"""Seeded random requests against a running tessera-server: mutated ModelInfer requests (names,
versions, datatypes, shapes, contents, parameters, requested outputs, shared-memory references,
regions the client truncates under the server), garbage and bit-flipped bytes in place of a
request, streams of such requests, and the other RPCs with odd arguments. Every answer must come
back in time with an expected status and, for an error, a message; a crash, a hang, INTERNAL or
UNKNOWN is a finding. test_request_fuzz.py runs a few thousand cases in CI; for a long run against
a sanitizer build:

  python tests/integration/request_fuzz.py --url 127.0.0.1:8001 --cases 20000 --seed 7

With --extra-models it also sends to models that another process (repository_fuzz.py) loads,
reloads and unloads meanwhile, so requests race with the model lifecycle.

The server must serve the bundled repository (mlp, small_cnn) with --allow-client-shm.
"""

import argparse
import os
import random
import sys

import grpc
import numpy as np
from tritonclient.grpc import service_pb2, service_pb2_grpc

SERVICE = "/inference.GRPCInferenceService/"
# Statuses a bad request may get. INTERNAL and UNKNOWN mean the server failed, not the request.
ACCEPTED_ERRORS = {
    grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND, grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.OUT_OF_RANGE,
    grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.ALREADY_EXISTS, grpc.StatusCode.PERMISSION_DENIED,
}
MODELS = {"mlp": [64], "small_cnn": [3, 32, 32]}
DATATYPES = ["FP32", "FP16", "FP64", "INT8", "INT16", "INT32", "INT64", "UINT8", "UINT32", "BOOL",
             "BYTES", "BF16", "", "fp32", "FP99"]
ELEMENT_BYTES = {"FP32": 4, "FP16": 2, "FP64": 8, "INT8": 1, "INT16": 2, "INT32": 4, "INT64": 8,
                 "UINT8": 1, "UINT32": 4, "BOOL": 1, "BF16": 2}
# A region the fuzzer registers (a real POSIX shm object it creates), and names it never does.
SHM_REGION = "fuzz_region"
SHM_KEY = f"/tessera-fuzz-region-{os.getpid()}"  # per process: fuzz tests may run side by side
SHM_BYTES = 4096
ODD_STRINGS = ["", " ", "mlp ", "MLP", "../mlp", "mlp/1", "a" * 5000, "\u00e9\u4e2d", "nul\x00x",
               "no_such_model", "-1", "0", "1", "2", "99999999999999999999", "1.5", "%s%n"]


class Finding(Exception):
    pass


def odd_int(rng):
    return rng.choice([0, 1, -1, 2, 7, 8, 9, 64, 65, 255, 1 << 20, 1 << 31, (1 << 63) - 1, -(1 << 63),
                       rng.randint(-100, 100)])


def odd_shape(rng, good):
    kind = rng.randrange(7)
    if kind == 0:
        return [rng.randint(1, 8)] + list(good)
    if kind == 1:
        return list(good)  # the batch dim missing
    if kind == 2:
        return []
    if kind == 3:
        return [odd_int(rng) for _ in range(rng.randint(1, 6))]
    if kind == 4:
        return [1] * rng.randint(7, 40)
    shape = [rng.randint(1, 8)] + list(good)
    shape[rng.randrange(len(shape))] = odd_int(rng)
    return shape


def odd_parameter(rng, param):
    """Sets one of the parameter's oneof fields (InferParameter or ModelRepositoryParameter)."""
    field = rng.choice([f.name for f in param.DESCRIPTOR.fields])
    if field in ("int64_param", "uint64_param", "int32_param", "uint32_param"):
        bits = 32 if "32" in field else 64
        value = odd_int(rng)
        if field.startswith("u"):
            value = abs(value) % (1 << bits)
        elif bits == 32:
            value = max(-(1 << 31), min(value, (1 << 31) - 1))
        setattr(param, field, value)
    elif field == "string_param":
        param.string_param = rng.choice(ODD_STRINGS + [SHM_REGION])
    elif field == "bool_param":
        param.bool_param = bool(rng.randrange(2))
    elif field == "double_param":
        param.double_param = rng.choice([0.0, -1.5, 1e300, float("nan")])
    else:
        setattr(param, field, bytes(rng.randrange(256) for _ in range(rng.randrange(16))))


PARAM_KEYS = ["shared_memory_region", "shared_memory_offset", "shared_memory_byte_size",
              "binary_data_size", "classification", "priority", "timeout", "sequence_id",
              "binary_data", "triton_enable_empty_final_response", "", "x" * 300]


def shm_reference(rng, params):
    params["shared_memory_region"].string_param = rng.choice([SHM_REGION, SHM_REGION, "unregistered"])
    params["shared_memory_byte_size"].int64_param = rng.choice(
        [256, SHM_BYTES, SHM_BYTES + 1, 0, -4, odd_int(rng)])
    if rng.randrange(2):
        params["shared_memory_offset"].int64_param = rng.choice([0, 4, 3, SHM_BYTES - 4, SHM_BYTES,
                                                                 -8, odd_int(rng)])


def infer_request(rng):
    """A ModelInferRequest that starts valid and gets a few random mutations."""
    model = rng.choice(list(MODELS))
    dims = MODELS[model]
    batch = rng.randint(1, 8)
    x = np.random.default_rng(rng.randrange(1 << 30)).standard_normal([batch] + dims).astype(np.float32)
    req = service_pb2.ModelInferRequest(model_name=model, id=str(rng.randrange(1000)))
    inp = req.inputs.add(name="input", datatype="FP32", shape=x.shape)
    req.raw_input_contents.append(x.tobytes())
    if rng.randrange(3):
        req.outputs.add(name="output")
    for _ in range(rng.randint(1, 4)):
        m = rng.randrange(16)
        if m == 0:
            req.model_name = rng.choice(ODD_STRINGS)
        elif m == 1:
            req.model_version = rng.choice(ODD_STRINGS)
        elif m == 2:
            inp.datatype = rng.choice(DATATYPES)
            if inp.datatype in ELEMENT_BYTES and rng.randrange(2):
                size = int(np.prod(inp.shape, dtype=object)) * ELEMENT_BYTES[inp.datatype]
                if 0 <= size <= (1 << 20):  # contents that fit the new datatype
                    req.raw_input_contents[:] = [bytes(size)]
        elif m == 3:
            del inp.shape[:]
            inp.shape.extend(odd_shape(rng, dims))
        elif m == 4:
            raw = req.raw_input_contents[0] if req.raw_input_contents else b""
            cut = rng.choice([0, 1, 3, len(raw) // 2, len(raw) - 1, len(raw) + 4])
            req.raw_input_contents[:] = [raw[:cut] if cut <= len(raw) else raw + bytes(cut - len(raw))]
        elif m == 5:
            req.raw_input_contents.append(bytes(rng.randrange(64)))
        elif m == 6:
            del req.raw_input_contents[:]
            if rng.randrange(2):
                n = rng.choice([max(0, min(int(np.prod(inp.shape, dtype=object)), 1 << 16)), 0, 1, 3])
                inp.contents.fp32_contents.extend([0.5] * n)
            elif rng.randrange(2):
                inp.contents.int_contents.extend([1] * rng.randint(0, 70))
            else:
                inp.contents.bytes_contents.extend([b"abc"] * rng.randint(0, 3))
        elif m == 7:
            inp.contents.fp32_contents.extend([1.0] * rng.randint(1, 70))  # raw and typed at once
        elif m == 8:
            inp.name = rng.choice(ODD_STRINGS + ["output"])
        elif m == 9:
            extra = req.inputs.add()
            extra.CopyFrom(inp)
            if rng.randrange(2):
                extra.name = rng.choice(["input", "input2", ""])
            req.raw_input_contents.append(req.raw_input_contents[0] if req.raw_input_contents else b"")
        elif m == 10:
            del req.inputs[:]
        elif m == 11:
            out = req.outputs.add(name=rng.choice(["output", "output", "nope", ""]))
            if rng.randrange(2):
                odd_parameter(rng, out.parameters[rng.choice(PARAM_KEYS)])
            if rng.randrange(3) == 0:
                out.parameters["classification"].int64_param = rng.choice([1, 3, 10, 11, 0, -2])
        elif m == 12:
            odd_parameter(rng, inp.parameters[rng.choice(PARAM_KEYS)])
        elif m == 13:
            odd_parameter(rng, req.parameters[rng.choice(PARAM_KEYS)])
        elif m == 14:
            del req.raw_input_contents[:]
            shm_reference(rng, inp.parameters)
        else:
            out = req.outputs.add(name="output") if not req.outputs else req.outputs[0]
            shm_reference(rng, out.parameters)
    return req


def mangled_bytes(rng):
    """Bytes that are not a well-formed request: random, truncated, or with flipped bits."""
    valid = infer_request(rng).SerializeToString()
    kind = rng.randrange(3)
    if kind == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(200)))
    if kind == 1:
        return valid[:rng.randrange(max(1, len(valid)))]
    data = bytearray(valid)
    for _ in range(rng.randint(1, 8)):
        if data:
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    return bytes(data)


class FuzzerBase:
    """What both fuzzers share: a seeded generator, a channel, the oracle (_check) and the counts
    of outcomes by status."""

    def __init__(self, url, seed, timeout_s):
        self.rng = random.Random(seed)
        self.timeout_s = timeout_s
        self.channel = grpc.insecure_channel(url, options=[("grpc.max_send_message_length", -1),
                                                           ("grpc.max_receive_message_length", -1)])
        self.stub = service_pb2_grpc.GRPCInferenceServiceStub(self.channel)
        self.counts = {}

    def close(self):
        self.channel.close()

    def run(self, cases, progress_every=0):
        """Runs cases 0..cases-1; raises Finding at the first one."""
        for i in range(cases):
            self.one_case(i)
            if progress_every and (i + 1) % progress_every == 0:
                print(f"{i + 1} cases: {self.counts}", flush=True)

    def _check(self, what, call, cut_short=False):
        """Runs `call`; with cut_short (a deadline of a millisecond or so) the client may also give
        up first, which leaves the server answering a call that is gone."""
        try:
            result = call()
            code = grpc.StatusCode.OK
        except grpc.RpcError as e:
            code = e.code()
            if cut_short and code in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED):
                self.counts["CUT_SHORT"] = self.counts.get("CUT_SHORT", 0) + 1
                return None
            if code not in ACCEPTED_ERRORS:
                raise Finding(f"{what}: {code} {e.details()!r}") from None
            if not e.details():
                raise Finding(f"{what}: {code} without a message") from None
            if code == grpc.StatusCode.UNAVAILABLE:
                self._check_server_is_up(what, e.details())
            result = None
        self.counts[code.name] = self.counts.get(code.name, 0) + 1
        return result

    def _check_server_is_up(self, what, details):
        """UNAVAILABLE is an expected answer (a model version going away), and also what a server
        that died gives: a probe tells them apart."""
        try:
            self.stub.ServerLive(service_pb2.ServerLiveRequest(), timeout=self.timeout_s)
        except grpc.RpcError as e:
            raise Finding(f"{what}: UNAVAILABLE {details!r}, and then the server did not answer "
                          f"ServerLive: {e.code()} {e.details()!r}") from None


def run_from_command_line(fuzzer, cases, progress_every):
    """main()'s loop: 0 when no case found anything, 1 (and the finding on stderr) otherwise."""
    try:
        fuzzer.run(cases, progress_every)
    except Finding as f:
        print(f"FINDING: {f}", file=sys.stderr)
        return 1
    finally:
        fuzzer.close()
    print(f"{cases} cases, no finding: {fuzzer.counts}")
    return 0


class Fuzzer(FuzzerBase):
    def __init__(self, url, seed, timeout_s=20.0):
        super().__init__(url, seed, timeout_s)
        self.raw_infer = self.channel.unary_unary(SERVICE + "ModelInfer")

    def register_region(self):
        """Registers SHM_REGION (the caller created SHM_KEY); again when a case unregistered it."""
        try:
            self.stub.SystemSharedMemoryRegister(service_pb2.SystemSharedMemoryRegisterRequest(
                name=SHM_REGION, key=SHM_KEY, byte_size=SHM_BYTES), timeout=self.timeout_s)
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.ALREADY_EXISTS:
                raise Finding(f"registering the fuzz region: {e.code()} {e.details()!r}") from None

    def one_case(self, index):
        rng, t = self.rng, self.timeout_s
        kind = rng.randrange(10)
        # One inference call in eight is cut short: a deadline of about a millisecond, or a
        # stream the client cancels after its first answer.
        short = kind <= 6 and rng.randrange(8) == 0
        if short:
            t = rng.choice([0.0002, 0.001, 0.003])
        if kind <= 4:
            req = infer_request(rng)
            resp = self._check(f"case {index} ModelInfer {req}"[:2000],
                               lambda: self.stub.ModelInfer(req, timeout=t), short)
            if resp is not None and len(resp.outputs) == 0:
                raise Finding(f"case {index}: ModelInfer OK without outputs: {req}"[:2000])
        elif kind == 5:
            data = mangled_bytes(rng)
            self._check(f"case {index} ModelInfer bytes {data[:64]!r}",
                        lambda: self.raw_infer(data, timeout=t), short)
        elif kind == 6:
            reqs = [infer_request(rng) for _ in range(rng.randint(1, 6))]
            cancel = short and rng.randrange(2) == 0
            if cancel:
                t = self.timeout_s
            def stream():
                answers = self.stub.ModelStreamInfer(iter(reqs), timeout=t)
                for r in answers:
                    if r.error_message == "" and not r.infer_response.outputs:
                        raise Finding(f"case {index}: stream answer with neither error nor outputs")
                    if cancel:
                        answers.cancel()
                        return
            self._check(f"case {index} ModelStreamInfer", stream, short)
        elif kind == 7:
            name = rng.choice(ODD_STRINGS + list(MODELS))
            version = rng.choice(ODD_STRINGS)
            calls = [
                lambda: self.stub.ModelMetadata(service_pb2.ModelMetadataRequest(name=name, version=version), timeout=t),
                lambda: self.stub.ModelConfig(service_pb2.ModelConfigRequest(name=name, version=version), timeout=t),
                lambda: self.stub.ModelReady(service_pb2.ModelReadyRequest(name=name, version=version), timeout=t),
                lambda: self.stub.ModelStatistics(service_pb2.ModelStatisticsRequest(name=name, version=version), timeout=t),
                lambda: self.stub.RepositoryIndex(service_pb2.RepositoryIndexRequest(repository_name=name, ready=bool(rng.randrange(2))), timeout=t),
            ]
            self._check(f"case {index} metadata-like RPC for {name!r}/{version!r}", rng.choice(calls))
        elif kind == 8:
            # Load/unload only names that are not served, so the served models stay up.
            name = rng.choice(["no_such_model", "", "../etc", "a" * 300, "nul\x00x"])
            if rng.randrange(2):
                req = service_pb2.RepositoryModelLoadRequest(model_name=name)
                if rng.randrange(2):
                    odd_parameter(rng, req.parameters[rng.choice(["config", "file:1/model.onnx", "x"])])
                self._check(f"case {index} RepositoryModelLoad {name!r}",
                            lambda: self.stub.RepositoryModelLoad(req, timeout=t))
            else:
                self._check(f"case {index} RepositoryModelUnload {name!r}",
                            lambda: self.stub.RepositoryModelUnload(
                                service_pb2.RepositoryModelUnloadRequest(model_name=name), timeout=t))
        else:
            self.shared_memory_case(index)

    def shared_memory_case(self, index):
        rng, t = self.rng, self.timeout_s
        kind = rng.randrange(6)
        if kind == 5:
            self.truncated_region_case(index)
        elif kind == 0:
            req = service_pb2.SystemSharedMemoryRegisterRequest(
                name=rng.choice(["fuzz_other", SHM_REGION, "", "a" * 300]),
                key=rng.choice([SHM_KEY, "/tessera-fuzz-missing", "", "no-slash", "/../etc/passwd", "/" + "k" * 300]),
                offset=abs(odd_int(rng)) % (1 << 64), byte_size=abs(odd_int(rng)) % (1 << 64))
            self._check(f"case {index} SystemSharedMemoryRegister {req}",
                        lambda: self.stub.SystemSharedMemoryRegister(req, timeout=t))
        elif kind == 1:
            name = rng.choice(["fuzz_other", "never_registered", "", SHM_REGION])
            self._check(f"case {index} SystemSharedMemoryUnregister {name!r}",
                        lambda: self.stub.SystemSharedMemoryUnregister(
                            service_pb2.SystemSharedMemoryUnregisterRequest(name=name), timeout=t))
        elif kind == 2:
            name = rng.choice(["", SHM_REGION, "never_registered"])
            self._check(f"case {index} SystemSharedMemoryStatus {name!r}",
                        lambda: self.stub.SystemSharedMemoryStatus(
                            service_pb2.SystemSharedMemoryStatusRequest(name=name), timeout=t))
        elif kind == 3:
            req = service_pb2.CudaSharedMemoryRegisterRequest(
                name="fuzz_cuda", raw_handle=bytes(rng.randrange(256) for _ in range(rng.randrange(80))),
                device_id=odd_int(rng) % (1 << 31), byte_size=abs(odd_int(rng)) % (1 << 64))
            self._check(f"case {index} CudaSharedMemoryRegister",
                        lambda: self.stub.CudaSharedMemoryRegister(req, timeout=t))
        else:
            req = service_pb2.TraceSettingRequest(model_name=rng.choice(["", "mlp", "no_such_model"]))
            key = rng.choice(["trace_level", "trace_rate", "trace_count", "log_frequency", "bogus"])
            req.settings[key].value.extend(rng.choice([[], ["OFF"], ["TIMESTAMPS"], ["-1"], ["abc"], ["1", "2"], ["0"]]))
            self._check(f"case {index} TraceSetting {key}",
                        lambda: self.stub.TraceSetting(req, timeout=t))
        self.register_region()

    def truncated_region_case(self, index):
        """The client truncates its registered object under the server (the pages go from the
        server's mapping too), sends requests that read or write the region, then restores it.
        Touching the lost pages unguarded kills the server with SIGBUS."""
        rng, t = self.rng, self.timeout_s
        path = "/dev/shm" + SHM_KEY
        os.truncate(path, rng.choice([0, 4, SHM_BYTES // 2]))
        try:
            for _ in range(2):
                req = service_pb2.ModelInferRequest(model_name="mlp")
                inp = req.inputs.add(name="input", datatype="FP32", shape=[1, 64])
                if rng.randrange(2):
                    inp.parameters["shared_memory_region"].string_param = SHM_REGION
                    inp.parameters["shared_memory_byte_size"].int64_param = 256
                    inp.parameters["shared_memory_offset"].int64_param = rng.choice([0, SHM_BYTES - 256])
                else:
                    req.raw_input_contents.append(bytes(256))
                out = req.outputs.add(name="output")
                out.parameters["shared_memory_region"].string_param = SHM_REGION
                out.parameters["shared_memory_byte_size"].int64_param = 40
                out.parameters["shared_memory_offset"].int64_param = rng.choice([0, SHM_BYTES - 40])
                self._check(f"case {index} ModelInfer on a truncated region",
                            lambda: self.stub.ModelInfer(req, timeout=t))
        finally:
            os.truncate(path, SHM_BYTES)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--extra-models", default="",
                        help="comma-separated models to send mlp-shaped requests to as well, e.g. "
                             "the ones repository_fuzz.py loads and unloads meanwhile")
    args = parser.parse_args()
    for name in filter(None, args.extra_models.split(",")):
        MODELS[name] = [64]
    import tritonclient.utils.shared_memory as shm
    handle = shm.create_shared_memory_region(SHM_REGION, SHM_KEY, SHM_BYTES)
    fuzzer = Fuzzer(args.url, args.seed)
    try:
        fuzzer.register_region()
        return run_from_command_line(fuzzer, args.cases, progress_every=1000)
    finally:
        shm.destroy_shared_memory_region(handle)

if __name__ == "__main__":
    sys.exit(main())
