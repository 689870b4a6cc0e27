"""CPU stand-ins for the catalog's runtime images, built from Debian packages (issue #28, item 4).

No registry with the upstream images (``pytorch/pytorch:…-cuda…``) is reachable here, so the real node runs an
image that carries what the runtime's command needs, published under the catalog's exact reference through
``images.registryMirror``. It **stands in** for the upstream image: Debian bookworm's ``python3-torch`` (1.13.1,
CPU only, with ``torchrun``) instead of PyTorch 2.10 with CUDA; ``WORKDIR /workspace`` and no ``USER`` (root) as
upstream's, so the platform's securityContext injection is what makes it run as uid 1000.

Built by ``mmdebstrap`` (Debian's package; ``make e2e-node-deps``) from ``deb.debian.org`` into one layer, then
cached in ``<e2e cache>/images/<name>-<key>/`` (``key`` hashes the build command and the image config): a cold
build downloads and unpacks the packages, a warm one reads three files. Reproducible from these files (the
package set is bookworm's of the day; the archive, not this code, decides the exact versions).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.e2e.build import BuildError
from tests.e2e.oci_images import Image, image
from tests.e2e.versions import REPO_ROOT
from trainer_infra.sandbox.versions import cache_root

SUITE = "bookworm"
ARCHIVE = "http://deb.debian.org/debian"
#: file times in the layer (mmdebstrap honours SOURCE_DATE_EPOCH)
EPOCH = "1700000000"
MMDEBSTRAP = "/usr/bin/mmdebstrap"
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: torch 1.13's ``Std.from_str`` iterates an ``IntFlag``, which on Python 3.11 leaves out ``NONE`` (0): ``torchrun``'s
#: default ``--redirects 0``/``--tee 0`` become None and every launch fails in ``to_map`` ("'NoneType' object has
#: no attribute 'get'", seen on the real node). Fixed in later torch; the stand-in carries the same one-line fix.
TORCHRUN_STD = "/usr/lib/python3/dist-packages/torch/distributed/elastic/multiprocessing/api.py"
TORCHRUN_BUG = "for s in Std:"
TORCHRUN_FIX = "for s in Std.__members__.values():"


@dataclass(frozen=True)
class StandIn:
    """A stand-in image: a name, the Debian packages it carries (with their dependencies), and the catalog
    runtime whose trainer image it stands in for."""

    name: str
    packages: tuple[str, ...]
    runtime: str

    @property
    def upstream(self) -> str:
        """The catalog's exact image reference (the ``node`` container of the runtime's file)."""
        doc = yaml.safe_load((REPO_ROOT / "runtimes" / f"{self.runtime}.yaml").read_text())
        job = next(j for j in doc["spec"]["template"]["spec"]["replicatedJobs"] if j["name"] == "node")
        containers = job["template"]["spec"]["template"]["spec"]["containers"]
        return str(next(c for c in containers if c["name"] == "node")["image"])


#: torch-distributed's image: python3, torch (CPU) and torchrun
TORCH = StandIn("torch", ("python3-torch",), "torch-distributed")
STAND_INS = (TORCH,)


def mmdebstrap_command(stand_in: StandIn, out: Path) -> list[str]:
    """One rootfs tarball: Essential packages plus ``packages`` without Recommends, docs and locales dropped,
    ``/workspace`` (the upstream images' WORKDIR, root-owned) added; no device nodes (runc makes /dev)."""
    return [
        MMDEBSTRAP,
        "--variant=essential",
        "--include=" + ",".join(stand_in.packages),
        "--aptopt=APT::Install-Recommends false",
        "--aptopt=Acquire::Languages none",
        "--dpkgopt=path-exclude=/usr/share/doc/*",
        "--dpkgopt=path-exclude=/usr/share/man/*",
        "--dpkgopt=path-exclude=/usr/share/locale/*",
        '--customize-hook=mkdir -p "$1/workspace"',
        f"--customize-hook=sed -i 's/{TORCHRUN_BUG}/{TORCHRUN_FIX}/' \"$1{TORCHRUN_STD}\" "
        f"&& grep -qF '{TORCHRUN_FIX}' \"$1{TORCHRUN_STD}\"",
        "--skip=output/dev",
        SUITE,
        str(out),
        ARCHIVE,
    ]


def image_config(stand_in: StandIn) -> dict[str, object]:
    return {
        "Env": [PATH_ENV],
        "WorkingDir": "/workspace",
        "Cmd": ["/bin/bash"],
        "Labels": {
            "org.opencontainers.image.description": f"CPU stand-in for {stand_in.upstream}, Debian {SUITE} packages "
            f"{', '.join(stand_in.packages)} (trainer-platform e2e; not the upstream image)"
        },
    }


def cache_key(stand_in: StandIn) -> str:
    recipe = {"build": mmdebstrap_command(stand_in, Path("OUT")), "config": image_config(stand_in)}
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


class StandInError(BuildError):
    """A stand-in image cannot be built (mmdebstrap missing or failed)."""


def folder(stand_in: StandIn, root: Path | None = None) -> Path:
    return (root or cache_root()) / "images" / f"{stand_in.name}-{cache_key(stand_in)}"


FILES = ("manifest.json", "config.json", "layer.tar.gz")


def build(stand_in: StandIn, root: Path | None = None) -> dict[str, float]:
    """Build the image into the cache unless it is there; the seconds each step took (empty: cached).
    Needs the Debian archive: ``python -m tests.e2e.run`` calls it before a session enters its own network."""
    where = folder(stand_in, root)
    return {} if all((where / n).is_file() for n in FILES) else _build(stand_in, where)


def stand_in_image(stand_in: StandIn, root: Path | None = None) -> Image:
    """The cached image; a missing one is an error naming the command that builds it."""
    where = folder(stand_in, root)
    if not all((where / n).is_file() for n in FILES):
        raise StandInError(
            f"the {stand_in.name} stand-in image is not built ({where}): run `python -m tests.e2e.runtime_images` "
            "(needs mmdebstrap and the Debian archive; `python -m tests.e2e.run` does it for E2E_NODE=1)"
        )
    manifest, config, layer = ((where / n).read_bytes() for n in FILES)
    return Image(manifest, config, (layer,))


def _build(stand_in: StandIn, folder: Path) -> dict[str, float]:
    if not Path(MMDEBSTRAP).exists():
        raise StandInError(f"{MMDEBSTRAP} is missing: run `make e2e-node-deps` (apt-get install mmdebstrap)")
    work = folder.with_name(folder.name + ".partial")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    rootfs = work / "rootfs.tar"
    start = time.monotonic()
    proc = subprocess.run(
        mmdebstrap_command(stand_in, rootfs),
        capture_output=True,
        text=True,
        env={"SOURCE_DATE_EPOCH": EPOCH, "PATH": PATH_ENV.removeprefix("PATH=")},
        check=False,
    )
    if proc.returncode != 0:
        raise StandInError(
            f"mmdebstrap for the {stand_in.name} stand-in failed ({proc.returncode}):\n{proc.stderr[-3000:]}"
        )
    times = {"mmdebstrap (download, unpack, configure)": round(time.monotonic() - start, 1)}
    start = time.monotonic()
    built = image(rootfs.read_bytes(), image_config(stand_in), compresslevel=1)  # level 9: minutes for 1.2 GB
    rootfs.unlink()
    for name, data in zip(FILES, (built.manifest, built.config, built.layers[0]), strict=True):
        (work / name).write_bytes(data)
    times["layer compressed"] = round(time.monotonic() - start, 1)
    shutil.rmtree(folder, ignore_errors=True)
    work.rename(folder)
    return times


if __name__ == "__main__":
    for each in STAND_INS:
        spent = build(each)
        print(f"[e2e] {each.name} stand-in for {each.upstream}: {spent or 'cached'} ({folder(each)})", flush=True)
