"""A read-only OCI registry on loopback that serves chart archives and images: the e2e's stand-in for a mirror.

The product's air-gap path is ``charts.repositoryMirror: oci://mirror/charts``: every chart is pulled from
``oci://mirror/charts/<original registry>/<path>/<chart>:<version>``. The e2e serves the ``../shared/charts``
archives at exactly those references, over HTTPS with the sandbox CA (the provider trusts it through
``SSL_CERT_FILE``, as a mirror with a private CA is trusted in production), so the stack's mirror setting is
what the engine uses. Only the pull side of the OCI distribution spec is implemented (``/v2/``, manifests,
blobs, tag lists): Helm pushes layouts like this one (config ``application/vnd.cncf.helm.config.v1+json``,
one ``…chart.content.v1.tar+gzip`` layer). Images (``oci_images.py``) are published under exact repository
names, the path ``images.registryMirror`` gives them (``publish``); the real node's containerd pulls them.
Every request is recorded so tests can prove the charts and images came from here and nowhere else.
"""

from __future__ import annotations

import hashlib
import io
import json
import ssl
import tarfile
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

from trainer_infra.sandbox.oci_images import Image

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.cncf.helm.config.v1+json"
CHART_TYPE = "application/vnd.cncf.helm.chart.content.v1.tar+gzip"


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def chart_metadata(archive: bytes) -> dict[str, Any]:
    """``Chart.yaml`` of a chart archive (the top-level chart, not a bundled dependency)."""
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")
            if len(parts) == 2 and parts[1] == "Chart.yaml":
                extracted = tar.extractfile(member)
                if extracted is None:
                    break
                data: dict[str, Any] = yaml.safe_load(extracted.read())
                return data
    raise ValueError("not a chart archive: no <chart>/Chart.yaml")


@dataclass
class Repository:
    """One repository of the registry: tags → manifest digests, and the blobs they reference."""

    tags: dict[str, str] = field(default_factory=dict)
    manifests: dict[str, bytes] = field(default_factory=dict)
    blobs: dict[str, bytes] = field(default_factory=dict)

    def add_chart(self, archive: bytes) -> str:
        """Add a chart under its version tag; return the tag."""
        meta = chart_metadata(archive)
        config = json.dumps(meta, sort_keys=True, separators=(",", ":")).encode()
        manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": MANIFEST_TYPE,
                "config": {"mediaType": CONFIG_TYPE, "digest": _digest(config), "size": len(config)},
                "layers": [{"mediaType": CHART_TYPE, "digest": _digest(archive), "size": len(archive)}],
                "annotations": {
                    "org.opencontainers.image.title": str(meta["name"]),
                    "org.opencontainers.image.version": str(meta["version"]),
                },
            },
            sort_keys=True,
        ).encode()
        self.blobs[_digest(config)] = config
        self.blobs[_digest(archive)] = archive
        self.manifests[_digest(manifest)] = manifest
        tag = str(meta["version"])
        self.tags[tag] = _digest(manifest)
        return tag

    def add_image(self, tag: str, image: Image) -> None:
        """Serve ``image`` under ``tag`` (and by its digest)."""
        self.blobs.update(image.blobs())
        self.manifests[image.digest] = image.manifest
        self.tags[tag] = image.digest


def repositories_for(archives: list[Path]) -> dict[str, Repository]:
    """Chart archives by chart name (``Chart.yaml``'s ``name``), each version under its tag."""
    repos: dict[str, Repository] = {}
    for archive_path in archives:
        data = archive_path.read_bytes()
        repos.setdefault(str(chart_metadata(data)["name"]), Repository()).add_chart(data)
    return repos


class ChartRegistry:
    """Serves charts on ``127.0.0.1:<port>`` until stopped; ``requests`` lists ``(method, path, status)``.

    A chart is served at every repository ``<prefix>/<path>/<chart name>`` — the layout ``helm push`` gives a
    mirror for any ``<path>`` — so the stack's mirrored references resolve without the registry knowing
    them; tests compare ``pulled()`` with the references the stack should use.
    """

    def __init__(
        self, archives: list[Path], prefix: str = "charts", cert: Path | None = None, key: Path | None = None
    ) -> None:
        self.repositories = repositories_for(archives)
        self.prefix = prefix.strip("/")
        #: image repositories by their exact name (``k8s/docker.io/library/busybox``)
        self.images: dict[str, Repository] = {}
        self.requests: list[tuple[str, str, int]] = []
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_HEAD(self) -> None:
                registry.respond(self, body=False)

            def do_GET(self) -> None:
                registry.respond(self, body=True)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.scheme = "http"
        if cert and key:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert, key)
            self._server.socket = context.wrap_socket(self._server.socket, server_side=True)
            self.scheme = "https"
        self._thread = threading.Thread(target=self._server.serve_forever, name="chart-registry", daemon=True)

    @property
    def host(self) -> str:
        """``127.0.0.1:<port>``: what ``charts.repositoryMirror`` names."""
        return f"127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> ChartRegistry:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> ChartRegistry:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def mirror(self) -> str:
        """The ``charts.repositoryMirror`` value for this registry."""
        return f"oci://{self.host}/{self.prefix}"

    def publish(self, repository: str, tag: str, image: Image) -> str:
        """Serve ``image`` as ``<host>/<repository>:<tag>``; return that reference."""
        self.images.setdefault(repository.strip("/"), Repository()).add_image(tag, image)
        return f"{self.host}/{repository.strip('/')}:{tag}"

    def pulled(self) -> list[str]:
        """References (``oci://host/path/chart:version``) whose chart archive was downloaded, in order."""
        refs = []
        for method, path, status in self.requests:
            if method != "GET" or status != 200 or "/blobs/" not in path:
                continue
            name, _, digest = path.removeprefix("/v2/").partition("/blobs/")
            if name in self.images:
                continue
            repo = self.repositories.get(name.rsplit("/", 1)[-1])
            if repo is None or repo.blobs.get(digest, b"")[:2] != b"\x1f\x8b":
                continue
            tag = next(t for t, m in repo.tags.items() if digest.encode() in repo.manifests[m])
            refs.append(f"oci://{self.host}/{name}:{tag}")
        return refs

    def route(self, path: str) -> tuple[int, bytes, str, str | None]:
        """(status, body, content type, digest) for a pull request path."""
        if path in ("/v2", "/v2/"):
            return 200, b"{}", "application/json", None
        for kind in ("manifests", "blobs", "tags"):
            marker = f"/{kind}/"
            if marker not in path:
                continue
            name, _, ref = path.removeprefix("/v2/").rpartition(marker)
            repo = self.images.get(name)
            if repo is None and path.startswith(f"/v2/{self.prefix}/"):
                repo = self.repositories.get(name.rsplit("/", 1)[-1])
            if repo is None:
                break
            if kind == "tags" and ref == "list":
                body = json.dumps({"name": name, "tags": sorted(repo.tags)}).encode()
                return 200, body, "application/json", None
            if kind == "manifests":
                digest = repo.tags.get(ref, ref)
                if digest in repo.manifests:
                    return 200, repo.manifests[digest], MANIFEST_TYPE, digest
            if kind == "blobs" and ref in repo.blobs:
                return 200, repo.blobs[ref], "application/octet-stream", ref
            break
        error = {"errors": [{"code": "NAME_UNKNOWN", "message": f"{path} is not served by the e2e mirror"}]}
        return 404, json.dumps(error).encode(), "application/json", None

    def respond(self, handler: BaseHTTPRequestHandler, body: bool) -> None:
        path = handler.path.split("?", 1)[0]
        status, data, content_type, digest = self.route(path)
        self.requests.append((handler.command, path, status))
        handler.send_response(status)
        handler.send_header("Docker-Distribution-API-Version", "registry/2.0")
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(data)))
        if digest:
            handler.send_header("Docker-Content-Digest", digest)
        handler.end_headers()
        if body:
            handler.wfile.write(data)
