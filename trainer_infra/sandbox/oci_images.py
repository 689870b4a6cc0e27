"""OCI images the e2e builds itself, byte for byte reproducible, for the real node to pull from the mirror.

No registry with upstream images is reachable here, so each image is made from a file this machine already has
(Debian's static busybox, our pause binary): one gzip layer written by ``tarfile`` with fixed owners and times,
an image config and an OCI manifest. The same inputs give the same manifest digest, so a test can assert that
what the node ran is exactly what was published.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from dataclasses import dataclass
from pathlib import Path

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
IMAGE_CONFIG_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_TYPE = "application/vnd.oci.image.layer.v1.tar+gzip"


def digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Image:
    """A single-platform OCI image: manifest, config and layers as the registry serves them."""

    manifest: bytes
    config: bytes
    layers: tuple[bytes, ...]

    @property
    def digest(self) -> str:
        """The manifest digest: what ``imageID`` of a pod's container status ends with."""
        return digest(self.manifest)

    def blobs(self) -> dict[str, bytes]:
        return {digest(b): b for b in (self.config, *self.layers)}


class Layer:
    """A tar layer built in memory: every entry root-owned unless said otherwise, mtime 0, in the order added."""

    def __init__(self) -> None:
        self._entries: list[tuple[tarfile.TarInfo, bytes | None]] = []

    def _add(
        self, name: str, kind: bytes, mode: int, data: bytes | None = None, link: str = "", owner: int = 0
    ) -> None:
        info = tarfile.TarInfo(name)
        info.type, info.mode, info.uid, info.gid, info.mtime, info.linkname = kind, mode, owner, owner, 0, link
        info.size = len(data) if data is not None else 0
        self._entries.append((info, data))

    def directory(self, name: str, mode: int = 0o755, owner: int = 0) -> None:
        """``owner``: uid and gid of the directory (a non-root image user's home)."""
        self._add(name, tarfile.DIRTYPE, mode, owner=owner)

    def file(self, name: str, data: bytes, mode: int = 0o644) -> None:
        self._add(name, tarfile.REGTYPE, mode, data)

    def symlink(self, name: str, target: str) -> None:
        self._add(name, tarfile.SYMTYPE, 0o777, link=target)

    def tar(self) -> bytes:
        """The uncompressed tar (its digest is the config's ``diff_id``)."""
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
            for info, data in self._entries:
                tar.addfile(info, io.BytesIO(data) if data is not None else None)
        return buffer.getvalue()


def image(layer_tar: bytes, config: dict[str, object], compresslevel: int = 9) -> Image:
    """An image of one layer and the given ``config`` section (amd64/linux)."""
    layer = gzip.compress(layer_tar, compresslevel=compresslevel, mtime=0)
    config_bytes = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": config,
            "rootfs": {"type": "layers", "diff_ids": [digest(layer_tar)]},
        },
        sort_keys=True,
        separators=(",", ":"),
    ).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPE,
            "config": {"mediaType": IMAGE_CONFIG_TYPE, "digest": digest(config_bytes), "size": len(config_bytes)},
            "layers": [{"mediaType": LAYER_TYPE, "digest": digest(layer), "size": len(layer)}],
        },
        sort_keys=True,
        separators=(",", ":"),
    ).encode()
    return Image(manifest, config_bytes, (layer,))


def pause_image(pause: Path) -> Image:
    """The pod sandbox image: our pause binary as ``/pause``, run as 65535 like upstream's."""
    layer = Layer()
    layer.file("pause", pause.read_bytes(), 0o755)
    return image(layer.tar(), {"Entrypoint": ["/pause"], "User": "65535:65535"})
