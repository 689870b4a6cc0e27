"""The team file service's server, on a real directory: what a member's job can plant on the claim (symlinks out of
it, `..`, a FIFO) is refused; directories are listed, regular files served byte for byte; nothing is written."""

from __future__ import annotations

import http.client
import json
import os
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from trainer_infra.storage import file_server

Served = tuple[str, int]


@pytest.fixture
def claim(tmp_path: Path) -> Path:
    root = tmp_path / "claim"
    job = root / "jobs" / "train-1"
    job.mkdir(parents=True)
    (job / "model.pt").write_bytes(bytes(range(256)) * 4096)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret").write_text("not the team's")
    (job / "environ").symlink_to("/proc/self/environ")
    (job / "etc").symlink_to("/etc")
    (job / "up").symlink_to(tmp_path / "outside")
    (job / "sibling").symlink_to(root / "jobs")  # stays inside the claim: refused all the same
    os.mkfifo(job / "fifo")
    return root


@pytest.fixture
def served(claim: Path) -> Iterator[Served]:
    class Handler(file_server.Handler):
        root_fd = os.open(claim, os.O_PATH | os.O_DIRECTORY)

    handler = Handler
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield "127.0.0.1", server.server_address[1]
    server.shutdown()
    server.server_close()
    os.close(handler.root_fd)


def fetch(served: Served, path: str, method: str = "GET") -> tuple[int, bytes]:
    connection = http.client.HTTPConnection(*served, timeout=10)
    connection.request(method, path, body=b"x" if method in ("POST", "PUT", "PATCH") else None)
    response = connection.getresponse()
    body = response.read()
    connection.close()
    return response.status, body


def test_a_job_directory_is_listed_and_its_file_served_byte_for_byte(served: Served, claim: Path) -> None:
    status, body = fetch(served, "/jobs/train-1/")
    assert status == 200
    listing = json.loads(body)
    assert listing["path"] == "/jobs/train-1/"
    kinds = {e["name"]: e["type"] for e in listing["entries"]}
    assert kinds == {
        "model.pt": "file",
        "environ": "symlink",
        "etc": "symlink",
        "up": "symlink",
        "sibling": "symlink",
        "fifo": "other",
    }
    size = next(e["size"] for e in listing["entries"] if e["name"] == "model.pt")
    status, body = fetch(served, "/jobs/train-1/model.pt")
    assert status == 200 and body == (claim / "jobs" / "train-1" / "model.pt").read_bytes() and len(body) == size
    assert fetch(served, "/")[0] == 200


@pytest.mark.parametrize("link", ["environ", "etc", "etc/passwd", "up/secret", "sibling/train-1/model.pt"])
def test_symlinks_are_never_followed(served: Served, link: str) -> None:
    status, body = fetch(served, f"/jobs/train-1/{link}")
    assert status == 403, body
    assert b"symlink" in body
    assert b"not the team's" not in body and b"root:" not in body


@pytest.mark.parametrize(
    "path", ["/jobs/../../outside/secret", "/jobs/%2e%2e/%2e%2e/outside/secret", "/..%2f..%2foutside/secret", "/.."]
)
def test_a_traversal_is_refused(served: Served, path: str) -> None:
    status, body = fetch(served, path)
    assert status == 403, body
    assert b"not the team's" not in body


def test_a_path_that_is_not_utf8_is_a_bad_request(served: Served) -> None:
    assert fetch(served, "/jobs/%ff")[0] == 400


def test_only_regular_files_and_directories(served: Served) -> None:
    status, body = fetch(served, "/jobs/train-1/fifo")  # opening a FIFO to read would hang the server
    assert status == 403 and b"not a regular file" in body
    assert fetch(served, "/jobs/train-1/missing")[0] == 404
    assert fetch(served, "/jobs/train-1/model.pt/x")[0] == 404


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_nothing_is_written(served: Served, claim: Path, method: str) -> None:
    before = (claim / "jobs" / "train-1" / "model.pt").read_bytes()
    status, _ = fetch(served, "/jobs/train-1/model.pt", method)
    assert status == 405
    assert (claim / "jobs" / "train-1" / "model.pt").read_bytes() == before
    assert sorted(p.name for p in (claim / "jobs" / "train-1").iterdir()) == sorted(
        ["model.pt", "environ", "etc", "up", "sibling", "fifo"]
    )


def test_head_gives_the_size_without_the_body(served: Served) -> None:
    connection = http.client.HTTPConnection(*served, timeout=10)
    connection.request("HEAD", "/jobs/train-1/model.pt")
    response = connection.getresponse()
    assert response.status == 200 and response.getheader("Content-Length") == str(256 * 4096)
    assert response.read() == b""
    connection.close()
