"""Images of the charts' controllers, made from the binaries the e2e builds from the pinned sources.

No registry with the upstream images is reachable here, so each controller image is rebuilt the way its upstream
Dockerfile assembles it: ``FROM gcr.io/distroless/static:nonroot``, the manager binary at ``/manager`` (the
charts' ``command: [/manager]``), ``USER 65532:65532`` (Trainer's Dockerfile sets no USER; distroless
``nonroot`` runs it as 65532 all the same), ``ENTRYPOINT ["/manager"]``. Our binaries are static (``CGO_ENABLED=0``,
``build.py``), like upstream's, so the layer needs no libc. Of distroless static it keeps what a controller can
touch at run time: ``/etc/passwd`` and ``/etc/group`` with ``nonroot``, its home, a world-writable ``/tmp``, and
``/etc/nsswitch.conf``; no CA bundle (a controller talks only to the API server, trusted through the
ServiceAccount's ``ca.crt``). One reproducible layer each (``oci_images.py``): the same binary gives the same
digest, which the tests compare with the pods' ``imageID``.

The references are the charts' own (the compatibility matrix's ``images`` of each release), published under the
path ``images.registryMirror`` gives them; the node pulls them through the mirror like any cluster would.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from trainer_infra.core.images import split_image
from trainer_infra.sandbox.oci_images import Image, Layer, image
from trainer_infra.sandbox.versions import VersionSet
from trainer_infra.versions import MATRIX

#: distroless's ``nonroot`` user and group
NONROOT = 65532
#: gzip level for the controllers' layers: 1 packs a 110 MB binary in about 3 s on this machine, 9 in ~20 s
#: for a few percent less; the registry is on loopback
COMPRESS_LEVEL = 1


@dataclass(frozen=True)
class ControllerImage:
    """One chart container: the upstream reference it is published under and the binary that stands for it."""

    reference: str
    binary: str
    version: str


def controller_images(versions: VersionSet) -> list[ControllerImage]:
    """Every controller container the e2e stack's charts run (Trainer with its LWS subchart, JobSet, Kueue), at
    the versions the sandbox built; a release the matrix lacks or a tag that is not the built version is refused."""
    wanted = {
        "jobset": (versions.jobset, {"manager": ("jobset-manager", versions.jobset)}),
        "kueue": (versions.kueue, {"manager": ("kueue-manager", versions.kueue)}),
        "trainer": (
            versions.trainer,
            {"manager": ("trainer-controller-manager", versions.trainer), "lws": ("lws-manager", versions.lws)},
        ),
    }
    found = []
    for component, (version, roles) in wanted.items():
        release = MATRIX.components[component].release(version)
        if release is None:
            raise ValueError(f"{component} {version} is not in the compatibility matrix: no image reference for it")
        for role, (binary, built) in roles.items():
            reference = release.images[role]
            tag = split_image(reference)[1]
            if tag.removeprefix("v") != built:
                raise ValueError(f"{reference}: the chart runs {tag}, the sandbox built {binary} v{built}")
            found.append(ControllerImage(reference, binary, built))
    return found


def controller_image(binary: Path) -> Image:
    """distroless ``static:nonroot`` with ``binary`` as ``/manager``, run as 65532 (see the module docstring)."""
    layer = Layer()
    for directory in ("etc", "home"):
        layer.directory(directory)
    layer.directory("home/nonroot", 0o700, owner=NONROOT)
    layer.directory("tmp", 0o1777)
    layer.file(
        "etc/passwd",
        f"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:{NONROOT}:{NONROOT}:nonroot:/home/nonroot:/sbin/nologin\n".encode(),
    )
    layer.file("etc/group", f"root:x:0:\nnonroot:x:{NONROOT}:\n".encode())
    layer.file("etc/nsswitch.conf", b"hosts: files dns\n")
    layer.file("manager", binary.read_bytes(), 0o755)
    config: dict[str, object] = {
        "Entrypoint": ["/manager"],
        "User": f"{NONROOT}:{NONROOT}",
        "WorkingDir": "/",
        "Env": ["PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin"],
    }
    return image(layer.tar(), config, compresslevel=COMPRESS_LEVEL)


def build_all(
    versions: VersionSet, bin_dir: Path, skip: Collection[str] = ()
) -> tuple[dict[str, Image], dict[str, float]]:
    """Upstream reference → image for every controller but those of ``skip`` (references already made from
    another set), and the seconds each took to build."""
    images, times = {}, {}
    for wanted in controller_images(versions):
        if wanted.reference in skip:
            continue
        path = bin_dir / wanted.binary
        if not path.exists():
            raise FileNotFoundError(f"{path} is missing: run trainer-infra sandbox build")
        start = time.monotonic()
        images[wanted.reference] = controller_image(path)
        times[f"{wanted.binary} image"] = round(time.monotonic() - start, 1)
    return images, times
