"""Several model repositories served as one (tritonserver's repeated --model-repository, or a
list in repository.path): models from each, a name two of them hold refused with both folders
named while the others serve, polls that follow each folder, and explicit loads from any."""

import re
import shutil

import pytest

from conftest import MODELS_DIR, copy_repository
from tessera_testlib import assert_mlp_serves, expect_error, model_ready, wait_until


def with_name(folder, name):
    config = folder / "config.yaml"
    config.write_text(re.sub(r"(?m)^name:.*$", f"name: {name}", config.read_text()))


@pytest.fixture(scope="module")
def repos(tmp_path_factory):
    """Repository a: mlp and shared; repository b: small_cnn and shared (so 'shared' is in both)."""
    base = tmp_path_factory.mktemp("repos")
    a = copy_repository(base / "a")
    b = base / "b"
    b.mkdir()
    shutil.move(str(a / "small_cnn"), str(b / "small_cnn"))
    for repo in (a, b):
        shutil.copytree(MODELS_DIR / "mlp", repo / "shared")
        with_name(repo / "shared", "shared")
    return a, b


@pytest.fixture(scope="module")
def server(make_server, repos):
    a, b = repos
    return make_server(repository=a, mode="poll", poll_secs=1,
                       extra_args=["--model-repository", str(b)],
                       wait_models=["mlp", "small_cnn"])


def index(client):
    return {m.name: (m.state, m.reason) for m in client.get_model_repository_index().models}


def test_models_of_every_repository_serve_and_a_shared_name_is_refused(server, repos):
    client = server.client()
    assert model_ready(client, "mlp") and model_ready(client, "small_cnn")
    assert_mlp_serves(client)
    state, reason = index(client)["shared"]
    assert state == "UNAVAILABLE", (state, reason)
    a, b = repos
    assert "more than one model repository" in reason, reason
    assert str(a / "shared") in reason and str(b / "shared") in reason, reason
    expect_error(lambda: assert_mlp_serves(client, "shared"), "UNAVAILABLE", "NOT_FOUND")


def test_polls_follow_each_repository(server, repos):
    client = server.client()
    a, b = repos
    shutil.copytree(a / "mlp", b / "mlp_in_b")
    with_name(b / "mlp_in_b", "mlp_in_b")
    wait_until(lambda: model_ready(client, "mlp_in_b"), timeout=20, what="mlp_in_b to load")
    assert_mlp_serves(client, "mlp_in_b")

    # Once only one repository holds 'shared', it loads from there.
    shutil.rmtree(a / "shared")
    wait_until(lambda: model_ready(client, "shared"), timeout=20, what="'shared' to load")
    assert_mlp_serves(client, "shared")


def test_explicit_loads_find_a_model_in_any_repository(make_server, repos, tmp_path):
    a, b = repos
    config = tmp_path / "server.yaml"
    config.write_text(f"repository:\n  path: [{a}, {b}]\n  control_mode: explicit\n")
    server = make_server(config=config, mode=None)
    client = server.client()
    client.load_model("mlp")  # from a
    client.load_model("small_cnn")  # from b
    assert_mlp_serves(client)
    assert client.is_model_ready("small_cnn")
    e = expect_error(lambda: client.load_model("nowhere"), "NOT_FOUND")
    assert f"not found in repositories '{a}', '{b}'" in e.message(), e.message()
