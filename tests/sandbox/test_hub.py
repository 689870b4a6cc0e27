"""The sandbox's stand-in Hub answers what huggingface_hub's snapshot_download asks (the repo's commit and files,
then each file's commit, ETag and size before its bytes), to the team's token only, and logs every request with
whose token it came. (The e2e test_sandbox_llm.py runs Trainer's initializers against it on the real node.)"""

from __future__ import annotations

import hashlib
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from trainer_infra.sandbox.hub import DATASET_REPO, MODEL_REPO, Hub, read_log, tiny_model

TOKEN = "hf_team_token"


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[tuple[Hub, str]]:
    server = Hub(TOKEN, tmp_path / "access.log")
    endpoint = server.start("127.0.0.1", 0)
    yield server, endpoint
    server.stop()


def _call(url: str, token: str | None = TOKEN, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, method=method)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def test_a_snapshot_of_the_model_is_its_commit_its_files_and_each_files_metadata(hub: tuple[Hub, str]) -> None:
    _, endpoint = hub
    status, _, body = _call(f"{endpoint}/api/models/{MODEL_REPO}/revision/main")
    info = json.loads(body)
    assert status == 200 and info["id"] == MODEL_REPO and len(info["sha"]) == 40
    assert {s["rfilename"] for s in info["siblings"]} == set(tiny_model())
    url = f"{endpoint}/{MODEL_REPO}/resolve/{info['sha']}/model.safetensors"
    status, headers, body = _call(url, method="HEAD")
    weights = tiny_model()["model.safetensors"]
    assert status == 200 and body == b""
    assert headers["X-Repo-Commit"] == info["sha"]
    assert headers["ETag"] == f'"{hashlib.sha256(weights).hexdigest()}"'
    assert int(headers["Content-Length"]) == len(weights) > 500_000
    assert _call(url)[2] == weights


def test_the_dataset_lives_under_datasets_and_unknown_things_are_the_hubs_errors(hub: tuple[Hub, str]) -> None:
    _, endpoint = hub
    info = json.loads(_call(f"{endpoint}/api/datasets/{DATASET_REPO}/revision/main")[2])
    status, _, body = _call(f"{endpoint}/datasets/{DATASET_REPO}/resolve/{info['sha']}/data/train.jsonl")
    assert status == 200 and len(body.splitlines()) == 64
    assert json.loads(body.splitlines()[0]).keys() == {"instruction", "input", "output"}
    assert _call(f"{endpoint}/api/models/other/repo/revision/main")[1]["X-Error-Code"] == "RepoNotFound"
    assert _call(f"{endpoint}/{MODEL_REPO}/resolve/main/nothing.json")[1]["X-Error-Code"] == "EntryNotFound"


def test_only_the_team_token_reads_and_every_request_is_logged_with_whose_token(hub: tuple[Hub, str]) -> None:
    server, endpoint = hub
    url = f"{endpoint}/api/models/{MODEL_REPO}/revision/main"
    assert _call(url, token=None)[0] == 401
    assert _call(url, token="hf_someone_else")[0] == 401
    assert _call(url)[0] == 200
    log = read_log(server.log)
    assert [(e["token"], e["status"]) for e in log] == [("none", 401), ("other", 401), ("team", 200)]
    assert all(e["client"] == "127.0.0.1" and e["path"] == f"/api/models/{MODEL_REPO}/revision/main" for e in log)
    assert TOKEN not in server.log.read_text()
