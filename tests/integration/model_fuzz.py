"""Seeded, structure-aware mutations of ONNX model files, loaded into a running tessera-server
(explicit mode) with no config (so the config is completed from the file). Where
repository_fuzz.py flips bits and mostly meets the protobuf parser, this one keeps each file a
well-formed ModelProto and breaks what the engine has to check: attribute values and types,
tensor shapes and element types of inputs, outputs and initializers, initializer data that does
not match its shape, external-data references (missing files, paths that leave the model folder,
offsets past the end), node inputs that are missing, unknown, empty or cyclic, duplicated or
deleted nodes, changed op types and domains, and odd opset and IR versions. Loads, reloads and
unloads come in random order, as in repository_fuzz.py (whose one_case this reuses).

The starting models are the bundled mlp and small_cnn and the single-operator models of the ONNX
project's node tests (Debian's libonnx-testdata), when installed. The oracle is
repository_fuzz.py's: every load answers in time with an expected status and, for an error, a
message; a model that loads answers metadata, config and an inference with zeros (or refuses it
clearly). A crash, a hang, INTERNAL or UNKNOWN is a finding; so is an executor that had to be
restarted (test_model_fuzz.py checks that; against a long-running server, look in its log).
test_model_fuzz.py runs a CI-sized share; for a long run against a sanitizer build:

  python tests/integration/model_fuzz.py --url 127.0.0.1:8001 --repository /tmp/models \\
      --cases 3000 --seed 3

--extra-seeds adds model files to the starting models (the quantized models of
bench/engine/converted_models.py, say, whose fused patterns no node test has).
"""

import argparse
import copy
import math
import shutil
import sys
from pathlib import Path

import onnx
from onnx import AttributeProto, TensorProto, helper

from repository_fuzz import RepositoryFuzzer
from request_fuzz import run_from_command_line

NODE_TESTS = Path("/usr/share/libonnx-testdata/data/node")
ODD_INTS = [0, 1, -1, 2, 3, -3, 7, 64, 1 << 31, -(1 << 31), 1 << 40, -(1 << 62)]
ODD_FLOATS = [0.0, -1.0, 1e-30, 1e30, math.inf, -math.inf, math.nan]
ODD_DIMS = [0, 1, 2, 3, 7, 1 << 20, 1 << 40]
ODD_NAMES = ["", "missing", "input", "output", "x", "\u00e9", "a" * 300]
OPS = ["Add", "Mul", "MatMul", "Gemm", "Conv", "Relu", "Reshape", "Transpose", "Softmax",
       "MaxPool", "AveragePool", "GlobalAveragePool", "Concat", "Flatten", "Gather", "Slice",
       "Split", "Squeeze", "Unsqueeze", "BatchNormalization", "LayerNormalization", "ReduceMean",
       "Expand", "Where", "Cast", "Identity", "Resize", "Pad", "Tile", "ConvTranspose", "Erf"]
ELEM_TYPES = list(range(0, 18))
# The external-data locations tried: missing, inside the folder, and ones that leave it.
EXTERNAL_LOCATIONS = ["weights.bin", "missing.bin", "../../../../../etc/passwd", "/etc/passwd",
                      "1/../model.onnx", ".", ""]


def seed_name(path):
    """A starting model file's name: its folder's, or in a model repository (m/1/model.onnx)
    its model's."""
    path = Path(path)
    return (path.parent.parent if path.parent.name.isdigit() else path.parent).name


def seed_models(repository, extra_seeds=()):
    """name -> ModelProto of every starting model (or the Path to load it from), with the model
    files of `extra_seeds` named by seed_name."""
    seeds = {m: onnx.load_from_string((Path(repository) / m / "1" / "model.onnx").read_bytes())
             for m in ("mlp", "small_cnn")}
    if NODE_TESTS.is_dir():
        for path in sorted(NODE_TESTS.glob("*/model.onnx")):
            seeds[path.parent.name] = path
    for path in extra_seeds:
        seeds[seed_name(path)] = Path(path)
    return seeds


class ModelMutator:
    def __init__(self, rng):
        self.rng = rng

    def mutate(self, model):
        """Applies one to three mutations to `model` (changed in place); returns the extra files
        the model folder needs (name -> bytes) and a short description of what was done."""
        extra, done = {}, []
        for _ in range(self.rng.randint(1, 3)):
            kind = self.rng.choice([self.attribute, self.attribute, self.value_info,
                                    self.value_info, self.initializer, self.initializer,
                                    self.node, self.node, self.opset, self.outputs])
            done.append(kind(model, extra))
        return extra, "; ".join(d for d in done if d)

    def _node(self, model):
        nodes = model.graph.node
        return nodes[self.rng.randrange(len(nodes))] if nodes else None

    def attribute(self, model, extra):
        rng, node = self.rng, self._node(model)
        if node is None:
            return ""
        if not node.attribute or rng.randrange(4) == 0:
            name = rng.choice(["axis", "axes", "perm", "kernel_shape", "strides", "pads",
                               "dilations", "group", "transA", "alpha", "epsilon", "mode", "to",
                               "unknown_attribute"])
            value = rng.choice([rng.choice(ODD_INTS), [rng.choice(ODD_INTS)] * rng.randint(1, 4),
                                rng.choice(ODD_FLOATS), "abc"])
            node.attribute.append(helper.make_attribute(name, value))
            return f"{node.op_type}: added {name}={value!r}"
        attr = node.attribute[rng.randrange(len(node.attribute))]
        if rng.randrange(6) == 0:
            node.attribute.remove(attr)
            return f"{node.op_type}: removed {attr.name}"
        if attr.type == AttributeProto.INT:
            attr.i = rng.choice(ODD_INTS)
        elif attr.type == AttributeProto.INTS:
            values = list(attr.ints)
            choice = rng.randrange(3)
            if choice == 0 and values:
                values[rng.randrange(len(values))] = rng.choice(ODD_INTS)
            elif choice == 1:
                values = values[:rng.randrange(len(values) + 1)]
            else:
                values += [rng.choice(ODD_INTS) for _ in range(rng.randint(1, 3))]
            del attr.ints[:]
            attr.ints.extend(values)
        elif attr.type == AttributeProto.FLOAT:
            attr.f = rng.choice(ODD_FLOATS)
        elif attr.type == AttributeProto.STRING:
            attr.s = rng.choice([b"", b"abc", b"\xff\xfe", b"linear", b"NOTSET"])
        elif attr.type == AttributeProto.TENSOR:
            self._mutate_tensor(attr.t, extra)
        else:
            # A type the op does not expect for this name.
            attr.type = rng.choice([AttributeProto.INT, AttributeProto.FLOATS,
                                    AttributeProto.STRING, AttributeProto.GRAPH])
        return f"{node.op_type}: {attr.name} changed"

    def value_info(self, model, extra):
        rng, graph = self.rng, model.graph
        pool = list(graph.input) + list(graph.output)
        if not pool:
            return ""
        info = pool[rng.randrange(len(pool))]
        tensor_type = info.type.tensor_type
        choice = rng.randrange(5)
        if choice == 0:
            tensor_type.elem_type = rng.choice(ELEM_TYPES)
        elif choice == 1:
            info.type.ClearField("tensor_type")
        elif choice == 2 and tensor_type.shape.dim:
            dim = tensor_type.shape.dim[rng.randrange(len(tensor_type.shape.dim))]
            if rng.randrange(3):
                dim.dim_value = rng.choice(ODD_DIMS)
            else:
                dim.dim_param = rng.choice(["N", "", "batch"])
        elif choice == 3:
            dims = tensor_type.shape.dim
            if dims and rng.randrange(2):
                del dims[rng.randrange(len(dims))]
            else:
                dims.add().dim_value = rng.choice(ODD_DIMS)
        else:
            tensor_type.ClearField("shape")
        return f"value info {info.name} changed"

    def initializer(self, model, extra):
        inits = model.graph.initializer
        if not inits:
            return ""
        tensor = inits[self.rng.randrange(len(inits))]
        self._mutate_tensor(tensor, extra)
        return f"initializer {tensor.name} changed"

    def _mutate_tensor(self, tensor, extra):
        rng = self.rng
        choice = rng.randrange(6)
        if choice == 0 and tensor.dims:
            tensor.dims[rng.randrange(len(tensor.dims))] = rng.choice(ODD_DIMS + [-1])
        elif choice == 1:
            if tensor.dims and rng.randrange(2):
                del tensor.dims[rng.randrange(len(tensor.dims))]
            else:
                tensor.dims.append(rng.choice(ODD_DIMS))
        elif choice == 2:
            tensor.data_type = rng.choice(ELEM_TYPES)
        elif choice == 3 and tensor.raw_data:
            tensor.raw_data = tensor.raw_data[:rng.randrange(len(tensor.raw_data))]
        elif choice == 4:
            # The data moved to a typed field of another element type, or to two fields at once.
            tensor.float_data.extend([1.0] * rng.randrange(1, 5))
            if rng.randrange(2):
                tensor.ClearField("raw_data")
        else:
            data = tensor.raw_data or b"\0" * 16
            tensor.ClearField("raw_data")
            tensor.data_location = TensorProto.EXTERNAL
            location = rng.choice(EXTERNAL_LOCATIONS)
            entries = {"location": location}
            if rng.randrange(2):
                entries["offset"] = str(rng.choice([0, 1, 7, 4096, 1 << 40, -1]))
            if rng.randrange(2):
                entries["length"] = str(rng.choice([0, 1, len(data), 1 << 40, -1]))
            if rng.randrange(4) == 0:
                entries["checksum"] = "abc"
            del tensor.external_data[:]
            for key, value in entries.items():
                tensor.external_data.add(key=key, value=value)
            if location == "weights.bin":
                extra["weights.bin"] = data[:rng.randrange(len(data) + 1)]

    def node(self, model, extra):
        rng, graph = self.rng, model.graph
        nodes = graph.node
        node = self._node(model)
        if node is None:
            return ""
        choice = rng.randrange(8)
        if choice == 0:
            node.op_type = rng.choice(OPS)
        elif choice == 1:
            node.domain = rng.choice(["ai.onnx.ml", "com.microsoft", "x", ""])
        elif choice == 2 and node.input:
            del node.input[rng.randrange(len(node.input))]
        elif choice == 3:
            node.input.append(rng.choice(ODD_NAMES + [o for n in nodes for o in n.output]))
        elif choice == 4 and node.input:
            # Its own output (a cycle), a later node's output, or a name nothing defines.
            names = list(node.output) + [o for n in nodes for o in n.output] + ODD_NAMES
            node.input[rng.randrange(len(node.input))] = rng.choice(names)
        elif choice == 5:
            nodes.append(copy.deepcopy(node))  # two producers of the same output
        elif choice == 6:
            nodes.remove(node)
        else:
            if node.output:
                node.output[rng.randrange(len(node.output))] = rng.choice(ODD_NAMES)
        return f"node {node.op_type} changed"

    def opset(self, model, extra):
        rng = self.rng
        choice = rng.randrange(4)
        if choice == 0 and model.opset_import:
            model.opset_import[0].version = rng.choice([0, 1, 6, 99, 1 << 40])
        elif choice == 1:
            del model.opset_import[:]
        elif choice == 2:
            model.opset_import.add(domain=rng.choice(["ai.onnx.ml", "com.microsoft", "x"]),
                                   version=rng.choice([1, 99]))
        else:
            model.ir_version = rng.choice([0, 1, 3, 99])
        return "opset/ir changed"

    def outputs(self, model, extra):
        rng, graph = self.rng, model.graph
        choice = rng.randrange(4)
        if choice == 0 and graph.input and graph.output:
            graph.output[0].name = graph.input[rng.randrange(len(graph.input))].name
        elif choice == 1 and graph.initializer and graph.output:
            graph.output[0].name = graph.initializer[0].name
        elif choice == 2 and graph.output:
            graph.output.append(copy.deepcopy(graph.output[0]))
        elif choice == 3 and graph.input:
            # A graph input that is also an initializer (a default the request may override),
            # or one fewer input.
            if graph.initializer and rng.randrange(2):
                graph.input.add().CopyFrom(helper.make_tensor_value_info(
                    graph.initializer[0].name, graph.initializer[0].data_type,
                    list(graph.initializer[0].dims)))
            else:
                del graph.input[rng.randrange(len(graph.input))]
        return "graph outputs/inputs changed"


class ModelFuzzer(RepositoryFuzzer):
    def __init__(self, url, repository, seed, timeout_s=60.0, extra_seeds=()):
        super().__init__(url, repository, seed, timeout_s)
        self.seeds = seed_models(repository, extra_seeds)
        self.seed_names = sorted(self.seeds)
        self.extra_names = sorted({seed_name(path) for path in extra_seeds})
        self.mutator = ModelMutator(self.rng)

    def _seed(self, name):
        model = self.seeds[name]
        if isinstance(model, Path):
            model = self.seeds[name] = onnx.load_from_string(model.read_bytes())
        return copy.deepcopy(model)

    def write_model(self, name):
        """Writes a mutated model (no config) as version 1 of `name`; RepositoryFuzzer.one_case
        loads, exercises or unloads it. Returns what was done, for the finding's text."""
        rng = self.rng
        # One case in four starts from a bundled model, whose loads get past the first checks;
        # half the others, when there are extra seeds, from one of those (else they would drown
        # among the node tests).
        if rng.randrange(4) == 0:
            seed = rng.choice(["mlp", "small_cnn"])
        elif self.extra_names and rng.randrange(2) == 0:
            seed = rng.choice(self.extra_names)
        else:
            seed = rng.choice(self.seed_names)
        model = self._seed(seed)
        extra, description = self.mutator.mutate(model)
        folder = self.repo / name
        shutil.rmtree(folder, ignore_errors=True)
        version = folder / "1"
        version.mkdir(parents=True)
        (version / "model.onnx").write_bytes(model.SerializeToString())
        for file_name, data in extra.items():
            (version / file_name).write_bytes(data)
        return f"{seed}: {description}"


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", required=True)
    parser.add_argument("--repository", required=True)
    parser.add_argument("--cases", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--extra-seeds", nargs="*", default=[], metavar="MODEL_ONNX",
                        help="more starting models, e.g. the quantized ones of "
                             "bench/engine/converted_models.py")
    args = parser.parse_args()
    fuzzer = ModelFuzzer(args.url, args.repository, args.seed, extra_seeds=args.extra_seeds)
    return run_from_command_line(fuzzer, args.cases, progress_every=100)


if __name__ == "__main__":
    sys.exit(main())
