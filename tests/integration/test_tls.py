"""TLS on the gRPC and HTTP endpoints: tritonclient serves through them with the CA that signed the
server's certificate; plaintext clients, clients without the certificate mutual TLS asks for, and
clients of another CA are refused while the server goes on serving; a renewed certificate is
served without a restart; and a wrong TLS file stops the start with the key and file named."""

import http.client
import json
import os
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from tessera_testlib import (BIN_DIR, MODELS_DIR, assert_close, assert_mlp_serves,
                             load_reference, start_fails, wait_until)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
from tls_certs import make_ca, make_leaf  # noqa: E402


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tls")
    ca = make_ca(folder, "server-ca")
    client_ca = make_ca(folder, "client-ca")
    other_ca = make_ca(folder, "other-ca")
    return {
        "folder": folder,
        "ca": ca,
        "server": make_leaf(folder, "server", ca),
        "client_ca": client_ca,
        "client": make_leaf(folder, "client", client_ca, usage="clientAuth"),
        "other_ca": other_ca,
        "stranger": make_leaf(folder, "stranger", other_ca, usage="clientAuth"),
    }


def grpc_kwargs(ca, client=None):
    kwargs = {"ssl": True, "root_certificates": str(ca.cert)}
    if client is not None:
        kwargs.update(private_key=str(client.key), certificate_chain=str(client.cert))
    return kwargs


def refused(make_client):
    """True when a client made by `make_client` cannot reach the server."""
    try:
        client = make_client()
        client.is_server_live(client_timeout=3.0)
    except InferenceServerException:
        return True
    return False


def write_config(folder, text):
    path = folder / f"server-{abs(hash(text))}.yaml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def tls_server(make_server, certs):
    """gRPC TLS from Triton's flags, HTTP TLS from server.yaml."""
    server = certs["server"]
    config = write_config(certs["folder"],
                          f"http:\n  tls: {{cert: {server.cert}, key: {server.key}}}\n")
    return make_server(repository=MODELS_DIR, mode="explicit", load_models=("mlp",),
                       wait_models=("mlp",), config=config,
                       extra_args=("--grpc-use-ssl", "--grpc-server-cert", str(server.cert),
                                   "--grpc-server-key", str(server.key)),
                       client_kwargs=grpc_kwargs(certs["ca"]))


def test_grpc_over_tls_serves(tls_server):
    assert_mlp_serves(tls_server.client())


def test_plaintext_grpc_client_is_refused(tls_server):
    assert refused(lambda: grpcclient.InferenceServerClient(url=tls_server.url))
    assert_mlp_serves(tls_server.client())


def test_grpc_client_of_another_ca_is_refused(tls_server, certs):
    assert refused(lambda: grpcclient.InferenceServerClient(url=tls_server.url,
                                                            **grpc_kwargs(certs["other_ca"])))


def test_http_over_tls_serves(tls_server, certs):
    client = httpclient.InferenceServerClient(tls_server.http_url, ssl=True,
                                              ssl_options={"ca_certs": str(certs["ca"].cert)})
    x, y = load_reference("mlp")
    inputs = [httpclient.InferInput("input", list(x.shape), "FP32")]
    inputs[0].set_data_from_numpy(x)
    assert_close(client.infer("mlp", inputs).as_numpy("output"), y, "mlp over HTTPS")
    client.close()


def test_plaintext_http_is_refused(tls_server):
    host, port = tls_server.http_url.split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=5)
    with pytest.raises((http.client.HTTPException, OSError)):
        connection.request("GET", "/v2/health/ready")
        connection.getresponse().read()
    connection.close()
    assert_mlp_serves(tls_server.client())


def test_tessera_bench_connects_over_tls(tls_server, certs, tmp_path):
    bench = [str(BIN_DIR / "tessera-bench"), "--progress", "off", "-u", tls_server.url, "-m", "mlp",
             "--rate", "50", "--warmup-s", "0", "--duration-s", "0.4", "--fail-on-error"]
    report = tmp_path / "report.json"
    run = subprocess.run(bench + ["--ssl-grpc-use-ssl", "--ssl-grpc-root-certifications-file",
                                  str(certs["ca"].cert), "--json", str(report)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    mlp = json.loads(report.read_text())["runs"][0]["models"][0]
    assert mlp["ok"] == mlp["intended"] > 0 and mlp["error_count"] == 0, mlp

    plain = subprocess.run(bench, capture_output=True, text=True, timeout=60)
    assert plain.returncode == 1 and "a TLS server needs --ssl-grpc-use-ssl" in plain.stderr, (
        plain.stderr)


def test_mutual_tls_requires_a_client_certificate_of_its_ca(make_server, certs):
    server = certs["server"]
    mutual = make_server(repository=MODELS_DIR, mode="explicit", load_models=("mlp",),
                         wait_models=("mlp",),
                         extra_args=("--grpc-use-ssl-mutual", "--grpc-server-cert",
                                     str(server.cert), "--grpc-server-key", str(server.key),
                                     "--grpc-root-cert", str(certs["client_ca"].cert)),
                         client_kwargs=grpc_kwargs(certs["ca"], certs["client"]))
    assert_mlp_serves(mutual.client())
    url = mutual.url
    assert refused(lambda: grpcclient.InferenceServerClient(url=url, **grpc_kwargs(certs["ca"])))
    assert refused(lambda: grpcclient.InferenceServerClient(
        url=url, **grpc_kwargs(certs["ca"], certs["stranger"])))
    assert_mlp_serves(mutual.client())


def live_pair(tmp_path, name):
    """A CA named `name` and a certificate and key it signed, at live.pem and live.key in
    `tmp_path`, where a renewal replaces them; returns (ca, cert path, key path)."""
    ca = make_ca(tmp_path, f"{name}-ca")
    leaf = make_leaf(tmp_path, name, ca)
    cert, key = tmp_path / "live.pem", tmp_path / "live.key"
    os.replace(leaf.cert, cert)  # as a mounted Secret changes: each file replaced whole
    os.replace(leaf.key, key)
    return ca, cert, key


def test_renewed_certificate_is_served_without_restart(make_server, certs, tmp_path):
    first_ca, cert, key = live_pair(tmp_path, "first")
    config = write_config(tmp_path, f"grpc:\n  tls: {{cert: {cert}, key: {key}, reload_secs: 1}}\n")
    server = make_server(repository=MODELS_DIR, mode="explicit", load_models=("mlp",),
                         wait_models=("mlp",), config=config, client_kwargs=grpc_kwargs(first_ca))
    assert_mlp_serves(server.client())

    second_ca, _, _ = live_pair(tmp_path, "second")

    def second_ca_trusted():
        return not refused(lambda: grpcclient.InferenceServerClient(
            url=server.url, **grpc_kwargs(second_ca)))

    wait_until(second_ca_trusted, timeout=20, interval=0.5, what="the renewed certificate served")
    assert refused(lambda: grpcclient.InferenceServerClient(url=server.url,
                                                            **grpc_kwargs(first_ca)))
    assert_mlp_serves(grpcclient.InferenceServerClient(url=server.url, **grpc_kwargs(second_ca)))


def https_get(url, ca, client=None, path="/v2/health/ready"):
    """GET over HTTPS trusting `ca`, presenting `client`'s certificate if given; the status."""
    context = ssl.create_default_context(cafile=str(ca.cert))
    if client is not None:
        context.load_cert_chain(str(client.cert), str(client.key))
    host, port = url.split(":")
    connection = http.client.HTTPSConnection(host, int(port), context=context, timeout=5)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def https_refused(url, ca, client=None):
    """True when the TLS handshake (or the first read after it, in TLS 1.3) fails."""
    try:
        https_get(url, ca, client)
    except (http.client.HTTPException, OSError):
        return True
    return False


def test_https_mutual_tls_requires_a_client_certificate_of_its_ca(make_server, certs):
    server, client = certs["server"], certs["client"]
    config = write_config(certs["folder"],
                          (f"http:\n  tls: {{cert: {server.cert}, key: {server.key}, "
                           f"client_ca: {certs['client_ca'].cert}}}\n"))
    mutual = make_server(repository=MODELS_DIR, mode="explicit", load_models=("mlp",),
                         wait_models=("mlp",), config=config)
    assert "(TLS, client certificates required)" in mutual.log_path.read_text()
    http_client = httpclient.InferenceServerClient(
        mutual.http_url, ssl=True, ssl_options={"ca_certs": str(certs["ca"].cert),
                                                "certfile": str(client.cert),
                                                "keyfile": str(client.key)})
    x, y = load_reference("mlp")
    inputs = [httpclient.InferInput("input", list(x.shape), "FP32")]
    inputs[0].set_data_from_numpy(x)
    assert_close(http_client.infer("mlp", inputs).as_numpy("output"), y, "mlp over mutual HTTPS")
    http_client.close()

    assert https_refused(mutual.http_url, certs["ca"])
    assert https_refused(mutual.http_url, certs["ca"], certs["stranger"])
    # A client certificate with the server's own CA is a stranger too: client_ca alone is trusted.
    assert https_refused(mutual.http_url, certs["ca"], server)
    assert https_get(mutual.http_url, certs["ca"], client) == 200
    assert_mlp_serves(mutual.client())


def test_renewed_https_certificate_is_served_without_restart(make_server, tmp_path):
    first_ca, cert, key = live_pair(tmp_path, "first")
    config = write_config(tmp_path, f"http:\n  tls: {{cert: {cert}, key: {key}, reload_secs: 1}}\n")
    server = make_server(repository=MODELS_DIR, mode="explicit", load_models=("mlp",),
                         wait_models=("mlp",), config=config)
    assert https_get(server.http_url, first_ca) == 200

    # Half a renewal (a new certificate beside the old key) is not served: the old one stays.
    second_ca = make_ca(tmp_path, "second-ca")
    second = make_leaf(tmp_path, "second", second_ca)
    os.replace(second.cert, cert)
    wait_until(lambda: "the previous certificate is served on" in server.log_path.read_text(),
               timeout=20, interval=0.5, what="the half renewal refused")
    assert https_get(server.http_url, first_ca) == 200

    os.replace(second.key, key)
    wait_until(lambda: not https_refused(server.http_url, second_ca), timeout=20, interval=0.5,
               what="the renewed HTTPS certificate served")
    assert https_refused(server.http_url, first_ca)
    assert https_get(server.http_url, second_ca, path="/v2/models/mlp/ready") == 200


def test_wrong_tls_files_stop_the_start(certs, tmp_path):
    server, other = certs["server"], certs["stranger"]
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello\n")
    locked = tmp_path / "locked.key"
    subprocess.run(["openssl", "pkey", "-in", str(server.key), "-aes256", "-passout", "pass:x",
                    "-out", str(locked)], check=True, capture_output=True)
    missing = tmp_path / "missing.pem"

    def grpc_files(cert, key):
        return ("--grpc-server-cert", cert, "--grpc-server-key", key)

    out = start_fails("--grpc-use-ssl")
    assert "gRPC TLS needs both a certificate and a key" in out
    out = start_fails(*grpc_files(missing, server.key))
    assert f"grpc.tls.cert: cannot read {missing}: No such file or directory" in out
    out = start_fails(*grpc_files(not_pem, server.key))
    assert f"grpc.tls.cert: {not_pem} holds no PEM certificate" in out
    out = start_fails(*grpc_files(server.cert, other.key))
    assert f"grpc.tls.key: {other.key} is not the key of the first certificate in {server.cert}" in out
    out = start_fails(*grpc_files(server.cert, server.cert))
    assert f"grpc.tls.key: {server.cert} holds no PEM private key" in out
    out = start_fails(*grpc_files(server.cert, locked))
    assert f"grpc.tls.key: {locked} holds no PEM private key (a passphrase-protected" in out
    out = start_fails("--grpc-use-ssl-mutual", *grpc_files(server.cert, server.key))
    assert "--grpc-use-ssl-mutual needs --grpc-root-cert" in out
    out = start_fails("--grpc-use-ssl-mutual", "--grpc-root-cert", not_pem,
                      *grpc_files(server.cert, server.key))
    assert f"grpc.tls.client_ca: {not_pem} holds no PEM certificate" in out

    http_key_only = write_config(tmp_path, f"http:\n  tls:\n    key: {server.key}\n")
    out = start_fails(config=http_key_only)
    assert f"{http_key_only}:3: http.tls.cert: must be set too when http.tls.key is" in out
    http_bad_key = write_config(tmp_path,
                                f"http:\n  tls: {{cert: {server.cert}, key: {other.key}}}\n")
    out = start_fails(config=http_bad_key)
    assert f"http.tls.key: {other.key} is not the key of the first certificate" in out
    http_bad_ca = write_config(tmp_path,
                               (f"http:\n  tls: {{cert: {server.cert}, key: {server.key}, "
                                f"client_ca: {not_pem}}}\n"))
    out = start_fails(config=http_bad_ca)
    assert f"http.tls.client_ca: {not_pem} holds no PEM certificate" in out
