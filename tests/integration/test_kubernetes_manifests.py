"""The Kubernetes manifests in docker/kubernetes/ against a real server started the way the pod
starts it (the image's entrypoint, then the Deployment's args): the probes (gRPC health, or HTTP
paths) answer SERVING or 200 on the ports they name, the Service reaches named container ports, the drain fits the grace period,
/dev/shm holds the executor rings, and the autoscaler's metric comes from a series the server
exports. No cluster is needed; what a cluster adds (scheduling, the adapter, Prometheus) is not
tested here."""

import json
import re
import urllib.error
import urllib.request

import grpc
import pytest
import yaml

from conftest import SOURCE_DIR, require_bundled_models
from tessera_testlib import BUNDLED_MODELS

K8S_DIR = SOURCE_DIR / "docker" / "kubernetes"
QUANTITY = re.compile(r"^(\d+)(Ki|Mi|Gi|Ti)?$")


def load_documents(name):
    with open(K8S_DIR / name) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def find(documents, kind):
    found = [d for d in documents if d.get("kind") == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def quantity_bytes(text):
    m = QUANTITY.match(str(text))
    assert m, f"unexpected quantity {text!r}"
    scale = {None: 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40}[m.group(2)]
    return int(m.group(1)) * scale


def dockerfile_entrypoint():
    text = (SOURCE_DIR / "docker" / "Dockerfile").read_text()
    lines = [line for line in text.splitlines() if line.startswith("ENTRYPOINT")]
    assert len(lines) == 1, "docker/Dockerfile should have one exec-form ENTRYPOINT"
    return json.loads(lines[0][len("ENTRYPOINT"):])


def http_status(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as response:
            return response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, ""


@pytest.fixture(scope="module")
def manifests():
    documents = load_documents("tessera.yaml")
    deployment = find(documents, "Deployment")
    service = find(documents, "Service")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return deployment, service, container


@pytest.fixture(scope="module")
def server_config():
    with open(SOURCE_DIR / "configs" / "server.yaml") as f:
        return yaml.safe_load(f)


@pytest.fixture(scope="module")
def pod_server(make_server, manifests):
    """The server as the pod runs it; ports come from the test (flags override the file, as the
    entrypoint's config does in the pod)."""
    require_bundled_models()
    _, _, container = manifests
    entrypoint = dockerfile_entrypoint()
    assert entrypoint[0] == "build/bin/tessera-server", entrypoint
    assert entrypoint[1:3] == ["--config", "configs/server.yaml"], entrypoint
    return make_server(config=SOURCE_DIR / entrypoint[2], mode=None,
                       extra_args=container.get("args", []), wait_models=BUNDLED_MODELS)


def test_container_ports_are_the_servers(manifests, server_config):
    _, _, container = manifests
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": server_config["http"]["port"], "grpc": server_config["grpc"]["port"],
                     "metrics": server_config["metrics"]["port"]}


def test_service_targets_named_container_ports(manifests):
    deployment, service, container = manifests
    names = {p["name"] for p in container["ports"]}
    for port in service["spec"]["ports"]:
        assert port["targetPort"] in names, port
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()


def grpc_health_status(port, service=""):
    """grpc.health.v1.Health/Check, encoded by hand (HealthCheckRequest{service = 1};
    HealthCheckResponse{status = 1}, SERVING = 1): the venv has no grpcio-health-checking."""
    request = b"" if not service else b"\x0a" + bytes([len(service)]) + service.encode()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        check = channel.unary_unary("/grpc.health.v1.Health/Check",
                                    request_serializer=lambda b: b,
                                    response_deserializer=lambda b: b)
        answer = check(request, timeout=10)
    return answer[1] if answer[:1] == b"\x08" else 0  # UNKNOWN when the field is absent


def test_probes_answer_on_the_ports_they_name(manifests, pod_server):
    _, _, container = manifests
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    served = {"http": pod_server.http_port, "grpc": pod_server.grpc_port}
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        spec = container[probe]
        if "grpc" in spec:
            # Kubernetes takes a number here; it must be the gRPC container port.
            assert spec["grpc"]["port"] == ports["grpc"], (probe, spec)
            status = grpc_health_status(served["grpc"], spec["grpc"].get("service", ""))
            assert status == 1, f"{probe}: grpc.health.v1 status {status}, not SERVING"
        else:
            get = spec["httpGet"]
            name = get["port"] if isinstance(get["port"], str) else {
                v: k for k, v in ports.items()}[get["port"]]
            assert name == "http", f"{probe} probes {get['port']}; only http has HTTP paths"
            status, _ = http_status(served["http"], get["path"])
            assert status == 200, f"{probe} GET {get['path']}: {status}"


def test_drain_fits_the_grace_period(manifests, server_config):
    deployment, _, container = manifests
    grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep", pre_stop
    drain = server_config["shutdown"]["drain_secs"]
    assert grace >= int(pre_stop[1]) + drain + 5, (grace, pre_stop, drain)


def test_dev_shm_holds_the_executor_rings(manifests, server_config):
    deployment, _, container = manifests
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    shm = [name for name, path in mounts.items() if path == "/dev/shm"]
    assert shm, "no volume mounted at /dev/shm (a container's default is 64 MiB)"
    empty_dir = volumes[shm[0]]["emptyDir"]
    assert empty_dir["medium"] == "Memory"
    executors = server_config["executors"]
    rings = executors["input_ring_bytes"] + executors["output_ring_bytes"]
    # Room for a second set: during a restart or a gpulet resize the new executor's rings can be
    # made while something still holds the old executor's.
    assert quantity_bytes(empty_dir["sizeLimit"]) >= 2 * rings * executors["cpu_executors"]


def test_metrics_annotations_point_at_the_metrics_endpoint(manifests, pod_server):
    deployment, _, container = manifests
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    metrics_port = {p["name"]: p["containerPort"] for p in container["ports"]}["metrics"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == metrics_port
    status, body = http_status(pod_server.metrics_port, annotations["prometheus.io/path"])
    assert status == 200 and "# TYPE" in body


def test_autoscaler_metric_comes_from_a_series_the_server_exports(manifests, pod_server):
    deployment, _, _ = manifests
    hpa = find(load_documents("autoscaling.yaml"), "HorizontalPodAutoscaler")
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
    metric = hpa["spec"]["metrics"][0]["pods"]["metric"]["name"]

    rules = yaml.safe_load((K8S_DIR / "prometheus-adapter-rules.yaml").read_text())
    rule = [r for r in rules["rules"]["custom"] if r["name"]["as"] == metric]
    assert len(rule) == 1, f"no prometheus-adapter rule serves {metric}"
    series = re.match(r"^(\w+)\{", rule[0]["seriesQuery"]).group(1)
    assert re.fullmatch(rule[0]["name"]["matches"], series), rule[0]

    _, body = http_status(pod_server.metrics_port, "/metrics")
    gauges = [line for line in body.splitlines() if line.startswith(f"# TYPE {series} ")]
    assert gauges and gauges[0].endswith(" gauge"), f"{series} is not a gauge on /metrics"
    samples = [line for line in body.splitlines() if line.startswith(series + "{")]
    assert {m for m in BUNDLED_MODELS} <= {re.search(r'model="([^"]+)"', s).group(1)
                                           for s in samples}, samples
