"""A stand-in Hugging Face Hub for the sandbox: the part of the Hub's HTTP API that ``huggingface_hub``'s
``snapshot_download`` uses, serving one tiny model and one tiny dataset that only the team's token may read, and an
access log of every request (who asked, with which token, for what).

What the client calls (huggingface_hub 1.6.0, the version the initializer stand-ins install; ``hf_api.py``
``model_info``/``dataset_info``, ``file_download.py`` ``get_hf_file_metadata``/``http_get``):
- ``GET /api/{models|datasets}/<org>/<name>/revision/<rev>``: the repo's ``sha`` (the commit) and ``siblings`` (its
  files, ``rfilename``);
- ``HEAD`` then ``GET /[datasets/]<org>/<name>/resolve/<commit>/<file>``: ``X-Repo-Commit``, ``ETag`` and
  ``Content-Length`` (no ``X-Xet-Hash``: plain HTTP download), then the bytes;
- ``GET /api/whoami-v2``: what ``huggingface_hub.login(token)`` checks (the initializers' ACCESS_TOKEN path).
Errors carry ``X-Error-Code`` (``RepoNotFound``, ``EntryNotFound``) as the Hub does, which the client maps to its
exceptions. Every repo is gated: without the team's bearer token a request gets 401.

The contents are made here (no model or dataset can be downloaded on this machine): a Llama-shaped config and a
1 MB of safetensors weights, a tokenizer file, and an instruction dataset in Alpaca's columns as JSON lines.
They exercise the download path, not a fine-tune's quality.
"""

from __future__ import annotations

import hashlib
import json
import struct
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

#: TEST-NET-2 (RFC 5737): never routed on the internet, outside the private ranges the teams' egress carves out,
#: so the default `tenancy.networkPolicies.egress` (0.0.0.0/0 minus private ranges) lets team pods reach it
HUB_IP = "198.51.100.7"
HUB_PORT = 80
MODEL_REPO = "trainer-platform/tiny-llama"
DATASET_REPO = "trainer-platform/tiny-alpaca"
KINDS = {"models": "", "datasets": "datasets/"}  # API plural -> resolve URL prefix (huggingface_hub constants)


def _safetensors(tensors: dict[str, tuple[int, ...]]) -> bytes:
    """The safetensors format: an 8-byte little-endian header length, a JSON header, the raw tensors (F32)."""
    header: dict[str, Any] = {}
    data = bytearray()
    for name, shape in sorted(tensors.items()):
        count = 1
        for d in shape:
            count *= d
        raw = b"".join(struct.pack("<f", ((i * 2654435761) % 1000 - 500) / 50000.0) for i in range(count))
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    return struct.pack("<Q", len(head)) + head + bytes(data)


def tiny_model() -> dict[str, bytes]:
    """A 2-layer Llama of hidden size 64 (≈ 0.9 MB of F32 weights) in the layout the model initializer keeps
    (``*.json``, ``*.safetensors``, ``*.model``, ``*.txt``), and a file it must skip (``*.bin``)."""
    vocab, hidden, layers, inter = 2048, 64, 2, 128
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": inter,
        "num_hidden_layers": layers,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "max_position_embeddings": 256,
        "rms_norm_eps": 1e-5,
        "torch_dtype": "float32",
    }
    tensors: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (vocab, hidden), "model.norm.weight": (hidden,)}
    for i in range(layers):
        p = f"model.layers.{i}"
        for proj in ("q_proj", "k_proj", "v_proj", "o_proj"):
            tensors[f"{p}.self_attn.{proj}.weight"] = (hidden, hidden)
        tensors[f"{p}.mlp.gate_proj.weight"] = (inter, hidden)
        tensors[f"{p}.mlp.up_proj.weight"] = (inter, hidden)
        tensors[f"{p}.mlp.down_proj.weight"] = (hidden, inter)
        tensors[f"{p}.input_layernorm.weight"] = (hidden,)
        tensors[f"{p}.post_attention_layernorm.weight"] = (hidden,)
    tokens = {f"t{i}": i for i in range(vocab)}
    return {
        "config.json": json.dumps(config, indent=2).encode(),
        "generation_config.json": b'{"max_new_tokens": 16}',
        "model.safetensors": _safetensors(tensors),
        "tokenizer.json": json.dumps({"version": "1.0", "model": {"type": "WordLevel", "vocab": tokens}}).encode(),
        "original/tokenizer.model": b"stand-in tokenizer\n",
        "pytorch_model.bin": b"skipped by the model initializer's ignore_patterns\n",
    }


def tiny_dataset() -> dict[str, bytes]:
    """Alpaca's columns (instruction, input, output), 64 rows of JSON lines, and a card."""
    rows = [
        {"instruction": f"Add {i} and {i + 1}.", "input": "", "output": f"{i} + {i + 1} = {2 * i + 1}"}
        for i in range(64)
    ]
    return {
        "README.md": b"# tiny-alpaca\nA stand-in instruction dataset for the sandbox.\n",
        "data/train.jsonl": "".join(json.dumps(r) + "\n" for r in rows).encode(),
    }


@dataclass(frozen=True)
class Repo:
    files: dict[str, bytes]

    @property
    def commit(self) -> str:
        """40 hex digits, stable for the same files (what a revision resolves to)."""
        listing = "".join(f"{name}:{hashlib.sha256(data).hexdigest()}\n" for name, data in sorted(self.files.items()))
        return hashlib.sha1(listing.encode()).hexdigest()


def default_repos() -> dict[tuple[str, str], Repo]:
    return {("models", MODEL_REPO): Repo(tiny_model()), ("datasets", DATASET_REPO): Repo(tiny_dataset())}


@dataclass
class Hub:
    """The server: ``token`` is the only one accepted; ``log`` gets one JSON line per request."""

    token: str
    log: Path
    repos: dict[tuple[str, str], Repo] = field(default_factory=default_repos)
    _server: ThreadingHTTPServer | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, host: str = HUB_IP, port: int = HUB_PORT) -> str:
        """Serve in a daemon thread; the endpoint (``http://host:port``, what HF_ENDPOINT names)."""
        hub = self

        class Handler(_Handler):
            pass

        Handler.hub = hub
        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="stand-in-hub", daemon=True).start()
        bound_port = self._server.server_address[1]
        return f"http://{host}:{bound_port}" if bound_port != 80 else f"http://{host}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def record(self, entry: dict[str, Any]) -> None:
        with self._lock, self.log.open("a") as out:
            out.write(json.dumps(entry, sort_keys=True) + "\n")


def read_log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


class _Handler(BaseHTTPRequestHandler):
    hub: Hub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # the access log is ours
        return

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def do_GET(self) -> None:
        self._serve(body=True)

    def _who(self) -> str:
        auth = self.headers.get("Authorization", "")
        if not auth:
            return "none"
        return "team" if auth == f"Bearer {self.hub.token}" else "other"

    def _serve(self, body: bool) -> None:
        path = unquote(urlsplit(self.path).path)
        who = self._who()
        status, headers, payload = (401, {"X-Error-Code": "GatedRepo"}, b'{"error":"token required"}')
        if who == "team":
            status, headers, payload = self._route(path)
        self.hub.record(
            {
                "time": round(time.time(), 3),
                "client": self.client_address[0],
                "method": self.command,
                "path": path,
                "token": who,
                "status": status,
                "userAgent": self.headers.get("User-Agent", ""),
            }
        )
        self.send_response(status)
        for key, value in {"Content-Length": str(len(payload)), **headers}.items():
            self.send_header(key, value)
        self.end_headers()
        if body:
            self.wfile.write(payload)

    def _route(self, path: str) -> tuple[int, dict[str, str], bytes]:
        if path == "/api/whoami-v2":
            return 200, {"Content-Type": "application/json"}, json.dumps({"type": "user", "name": "team"}).encode()
        parts = path.strip("/").split("/")
        if parts[:1] == ["api"] and len(parts) >= 4 and parts[1] in KINDS:
            repo = self.hub.repos.get((parts[1], "/".join(parts[2:4])))
            if repo is None:
                return 404, {"X-Error-Code": "RepoNotFound"}, b'{"error":"repo not found"}'
            info = {
                "id": "/".join(parts[2:4]),
                "sha": repo.commit,
                "private": False,
                "gated": "manual",
                "siblings": [{"rfilename": name} for name in sorted(repo.files)],
            }
            return 200, {"Content-Type": "application/json"}, json.dumps(info).encode()
        kind = "datasets" if parts[:1] == ["datasets"] else "models"
        rest = parts[1:] if kind == "datasets" else parts
        if len(rest) >= 5 and rest[2] == "resolve":
            repo = self.hub.repos.get((kind, "/".join(rest[:2])))
            if repo is None:
                return 404, {"X-Error-Code": "RepoNotFound"}, b'{"error":"repo not found"}'
            if rest[3] not in ("main", repo.commit):
                return 404, {"X-Error-Code": "RevisionNotFound"}, b'{"error":"revision not found"}'
            data = repo.files.get("/".join(rest[4:]))
            if data is None:
                return 404, {"X-Error-Code": "EntryNotFound"}, b'{"error":"entry not found"}'
            etag = f'"{hashlib.sha256(data).hexdigest()}"'
            return 200, {"X-Repo-Commit": repo.commit, "ETag": etag, "Content-Type": "application/octet-stream"}, data
        return 404, {"X-Error-Code": "EntryNotFound"}, b'{"error":"not found"}'
