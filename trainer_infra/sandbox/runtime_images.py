"""CPU stand-ins for the catalog's runtime images, built from Debian packages and PyPI wheels (issue #28, item 4).

No registry with the upstream images (``pytorch/pytorch:…-cuda…``, Trainer's xgboost/deepspeed/mlx runtimes,
NVIDIA's JAX) is reachable here, so the real node runs images that carry what each runtime's command needs,
published under the catalog's exact references through ``images.registryMirror``. They **stand in** for the
upstream images: e.g. Debian bookworm's ``python3-torch`` (1.13.1, CPU only, with ``torchrun``) instead of
PyTorch 2.10 with CUDA; the working directory, HOME, user and sshd settings as upstream's (no ``USER``: root, so
the platform's securityContext injection or the runtime's ``runAsUser`` is what makes them run as uid 1000).

Built by ``mmdebstrap`` (Debian's package; ``make e2e-node-deps``) from ``deb.debian.org`` into one layer, then
cached in ``<e2e cache>/images/<name>-<key>/`` (``key`` hashes the build command and the image config): a cold
build downloads and unpacks the packages, a warm one reads three files. Reproducible from these files (the
package set is bookworm's of the day; the archive, not this code, decides the exact versions).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from trainer_infra.core.upstream import trainer
from trainer_infra.sandbox.build import BuildError
from trainer_infra.sandbox.oci_images import Image, digest, image
from trainer_infra.sandbox.versions import CHECKOUT, VersionSet, cache_root, module_dir

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
    """A stand-in image: a name, the Debian packages it carries (with their dependencies), the catalog runtime
    whose ``container`` image it stands in for (the trainer's, ``node``, unless an initializer's; ``also``: more
    runtimes served by the same image), PyPI wheels installed over the packages (``wheels``: pinned requirements,
    binary only, for bookworm's Python), ``module_files`` copied from the pinned Trainer Go module into ``workdir``
    (upstream's Dockerfile ``COPY``), ``hooks`` run on the rootfs (mmdebstrap customize hooks, ``$1`` the rootfs)
    and the image config upstream's Dockerfile sets."""

    name: str
    packages: tuple[str, ...]
    runtime: str
    also: tuple[str, ...] = ()
    wheels: tuple[str, ...] = ()
    hooks: tuple[str, ...] = ()
    workdir: str = "/workspace"
    env: tuple[str, ...] = ()
    container: str = "node"
    module_files: tuple[str, ...] = ()
    entrypoint: tuple[str, ...] = ()
    #: the reference of an image that stands in for no runtime (``runtime`` empty): the notebook's
    reference: str = ""

    @property
    def runtimes(self) -> tuple[str, ...]:
        return (self.runtime, *self.also) if self.runtime else ()

    @property
    def upstream(self) -> str:
        """The catalog's exact image reference (the ``container`` of the runtime's file), or ``reference``."""
        return self.reference or upstream_image(self.runtime, self.container)


def upstream_image(runtime: str, container: str = "node") -> str:
    """A container's image in a catalog runtime's file (``${TRAINER_VERSION}`` left as written)."""
    doc = yaml.safe_load((CHECKOUT / "runtimes" / f"{runtime}.yaml").read_text())
    for job in doc["spec"]["template"]["spec"]["replicatedJobs"]:
        for c in job["template"]["spec"]["template"]["spec"]["containers"]:
            if c["name"] == container:
                return str(c["image"])
    raise KeyError(f"runtime {runtime} has no container {container}")


#: where pip puts the wheels: bookworm's python3.11 reads it before its own dist-packages
SITE = "/usr/local/lib/python3.11/dist-packages"
#: glibc 2.36 (bookworm) runs manylinux wheels up to 2_36; pip wants every tag named when it installs for a target
MANYLINUX = (*(f"manylinux_2_{v}_x86_64" for v in (36, 35, 28, 27, 17)), "manylinux2014_x86_64")


def wheels_hook(wheels: tuple[str, ...]) -> str:
    """The host's pip (Debian's python3-pip, bookworm's Python 3.11 as in the image) installs binary wheels for
    the image's Python into its site directory: no pip, compiler or network inside the rootfs."""
    platforms = " ".join(f"--platform {p}" for p in MANYLINUX)
    return (
        f"python3 -m pip install --quiet --no-warn-script-location --only-binary=:all: {platforms} "
        f'--python-version 3.11 --implementation cp --target "$1{SITE}" ' + " ".join(f"'{w}'" for w in wheels)
    )


#: torch-distributed's image: python3, torch (CPU) and torchrun
TORCH = StandIn(
    "torch",
    ("python3-torch",),
    "torch-distributed",
    hooks=(
        f"sed -i 's/{TORCHRUN_BUG}/{TORCHRUN_FIX}/' \"$1{TORCHRUN_STD}\" "
        f"&& grep -qF '{TORCHRUN_FIX}' \"$1{TORCHRUN_STD}\"",
    ),
)
#: xgboost-runtime: python3 and XGBoost (bookworm's 1.7.4, CPU; upstream: 3.0.2 with CUDA 12) with its Rabit
#: tracker; upstream's WORKDIR /workspace, root. scipy's pythran brings g++ and boost's headers (≈ 300 MB that
#: nothing runs): dropped from the layer.
XGBOOST = StandIn(
    "xgboost",
    ("python3-xgboost",),
    "xgboost-distributed",
    hooks=('rm -rf "$1/usr/include" "$1/usr/lib/gcc" "$1/usr/libexec/gcc"',),
)
#: NVIDIA's JAX container: python3 and jax/jaxlib CPU wheels (upstream: JAX with CUDA); WORKDIR /workspace, root
JAX = StandIn(
    "jax",
    ("python3", "libstdc++6"),
    "jax-distributed",
    wheels=(
        "jax==0.7.1",
        "jaxlib==0.7.1",
        "ml_dtypes==0.6.0",
        "numpy==2.4.6",
        "opt_einsum==3.4.0",
        "scipy==1.17.1",
    ),
)
#: the MPI plugin's ports and paths (mpi-operator's base image, which deepspeed-runtime and mlx-runtime copy their
#: SSH configuration from): sshd and ssh on port 2222, the user ``mpiuser`` (uid 1000, the runtimes'
#: ``runAsUser``) with HOME /home/mpiuser, whose ``.ssh`` is the plugin's key Secret (``sshAuthMountPath``)
MPI_USER, MPI_UID, MPI_PORT = "mpiuser", 1000, 2222
MPI_HOME = f"/home/{MPI_USER}"
MPI_HOOKS = (
    f"echo '{MPI_USER}:x:{MPI_UID}:{MPI_UID}::{MPI_HOME}:/bin/bash' >> \"$1/etc/passwd\" "
    f"&& echo '{MPI_USER}:x:{MPI_UID}:' >> \"$1/etc/group\" "
    f"&& echo '{MPI_USER}:!:19000:0:99999:7:::' >> \"$1/etc/shadow\"",
    # ssh_config as mpi-operator's base image: no host key prompt, no known_hosts to write (the .ssh folder is a
    # read-only Secret), port 2222 (its Host * block is the file's last)
    f"sed -i 's/^#* *StrictHostKeyChecking .*/    StrictHostKeyChecking no/; s/^#* *Port .*/    Port {MPI_PORT}/' "
    '"$1/etc/ssh/ssh_config" && echo "    UserKnownHostsFile /dev/null" >> "$1/etc/ssh/ssh_config"',
    # sshd as the user: its pid file and host key (the Secret's key) in HOME; no permission checks on the Secret
    f'mkdir -p "$1{MPI_HOME}" && printf \'PidFile {MPI_HOME}/sshd.pid\\nHostKey {MPI_HOME}/.ssh/id_rsa\\n'
    f'StrictModes no\\nPort {MPI_PORT}\\n\' > "$1{MPI_HOME}/.sshd_config" '
    f'&& chown -R {MPI_UID}:{MPI_UID} "$1{MPI_HOME}"',
    # as upstream's images (mpi-operator's base, deepspeed-runtime, mlx-runtime): sshd may bind a port below 1024 as
    # non-root. A file capability the container's bounding set lacks makes exec fail (EPERM), so this stand-in
    # shows what Pod Security `restricted` (drop ALL) does to upstream's sshd
    'setcap cap_net_bind_service=+eip "$1/usr/sbin/sshd"',
    # MLX's MPI backend dlopens libmpi.so (upstream's image has it from libopenmpi-dev)
    'ln -s libmpi.so.40 "$1/usr/lib/x86_64-linux-gnu/libmpi.so"',
)
#: deepspeed-runtime and mlx-runtime: OpenMPI (bookworm's 4.1.4; upstream: 5.0.7), sshd and ssh as the MPI plugin
#: expects them, python3 with mpi4py and MLX's CPU wheels. One image for both runtimes (their MPI path is the
#: same; upstream builds both on mpi-operator's base): no DeepSpeed or torch (deepspeed-runtime's payload), no
#: MLX CUDA. Upstream's WORKDIR and HOME /home/mpiuser, root by default (the runtimes set runAsUser 1000).
MPI = StandIn(
    "mpi",
    ("openmpi-bin", "openssh-server", "openssh-client", "python3-mpi4py"),
    "deepspeed-distributed",
    also=("mlx-distributed",),
    wheels=("mlx==0.32.4", "mlx-cpu==0.32.4"),
    hooks=MPI_HOOKS,
    workdir=MPI_HOME,
    env=(f"HOME={MPI_HOME}",),
)
#: the kubeflow SDK the project pins (pyproject.toml's test extra) and its dependencies, each pinned: the
#: notebook's ``TrainerClient()`` is the one the e2e's host runs
NOTEBOOK_WHEELS = (
    "kubeflow==0.5.0",
    "kubeflow-trainer-api==2.3.0",
    "kubeflow-katib-api==0.19.0",
    "kubernetes==35.0.0",
    "pydantic==2.14.4",
    "pydantic-core==2.50.5",
    "annotated-types==0.8.0",
    "typing-extensions==4.16.0",
    "typing-inspection==0.4.5",
    "requests==2.34.2",
    "urllib3==2.8.0",
    "certifi==2026.10.19.post1",
    "charset-normalizer==3.5.3",
    "idna==3.20",
    "python-dateutil==4.0.0",
    "six==1.17.0",
    "PyYAML==6.0.4",
    "websocket-client==1.9.2",
    "requests-oauthlib==2.0.0",
    "oauthlib==4.0.1",
    "durationpy==0.11",
)
#: the team notebook's image in the sandbox (``teams[].notebook.image``, through the mirror): python3 and the pinned
#: kubeflow SDK, nothing else (no Jupyter: the e2e runs the SDK with ``kubectl exec``); no ``USER``, the Deployment's
#: securityContext runs it as uid 1000
NOTEBOOK = StandIn(
    "notebook",
    ("python3", "ca-certificates"),
    "",
    wheels=NOTEBOOK_WHEELS,
    reference="ghcr.io/trainer-platform/sandbox-notebook:kubeflow-0.5.0",
)
#: Trainer's initializers (cmd/initializers/{model,dataset}/Dockerfile): python:3.14-slim-bookworm with the module's
#: pkg/initializers in /app and requirements.txt installed, ENTRYPOINT `python -m pkg.initializers.<step>`. Here:
#: bookworm's python3 (3.11, enough for their `match`), the pinned module's sources and the requirements resolved to
#: wheels (huggingface-hub>=0.27.0,<1.7, opendal>=0.46.0; kubernetes>=27.2.0 for the dataset's cache:// scheme).
INITIALIZER_SOURCES = ("pkg/initializers",)
HUB_WHEELS = (
    "annotated-doc==0.0.7",
    "annotated-types==0.8.0",
    "anyio==4.16.0",
    "certifi==2026.10.19.post1",
    "filelock==4.3.1",
    "fsspec==2026.9.0",
    "h11==0.16.0",
    "hf-xet==1.8.0",
    "httpcore==1.0.9",
    "httpx==0.28.1",
    "huggingface_hub==1.6.0",
    "idna==3.20",
    "markdown-it-py==4.3.0",
    "mdurl==0.1.2",
    "opendal==0.47.12",
    "packaging==26.4",
    "pydantic==2.14.4",
    "pydantic_core==2.50.5",
    "pygments==2.21.0",
    "pyyaml==6.0.4",
    "rich==15.0.0",
    "shellingham==1.5.4",
    "tqdm==4.70.1",
    "typer==0.29.2",
    "typing-inspection==0.4.5",
    "typing_extensions==4.16.0",
)
KUBERNETES_WHEELS = (
    "aiohappyeyeballs==2.7.1",
    "aiohttp-retry==2.9.1",
    "aiohttp==3.14.5",
    "aiosignal==1.4.0",
    "attrs==26.1.0",
    "charset-normalizer==3.5.3",
    "durationpy==0.11",
    "frozenlist==1.8.0",
    "kubernetes==37.0.2",
    "multidict==7.2.1",
    "oauthlib==4.0.1",
    "propcache==0.5.4",
    "python-dateutil==4.0.0",
    "requests-oauthlib==2.0.0",
    "requests==2.34.2",
    "tzdata==2026.6",
    "urllib3==2.8.0",
    "websocket-client==1.9.2",
    "yarl==1.25.1",
)
TORCHTUNE_RUNTIMES = ("torchtune-llama3.2-1b", "torchtune-llama3.2-3b", "torchtune-qwen2.5-1.5b")
MODEL_INITIALIZER = StandIn(
    "model-initializer",
    ("python3",),
    TORCHTUNE_RUNTIMES[0],
    also=TORCHTUNE_RUNTIMES[1:],
    wheels=HUB_WHEELS,
    workdir="/app",
    container="model-initializer",
    module_files=INITIALIZER_SOURCES,
    entrypoint=("python3", "-m", "pkg.initializers.model"),
)
DATASET_INITIALIZER = StandIn(
    "dataset-initializer",
    ("python3",),
    TORCHTUNE_RUNTIMES[0],
    also=(*TORCHTUNE_RUNTIMES[1:], "torch-distributed-with-cache"),
    wheels=tuple(sorted(HUB_WHEELS + KUBERNETES_WHEELS)),
    workdir="/app",
    container="dataset-initializer",
    module_files=INITIALIZER_SOURCES,
    entrypoint=("python3", "-m", "pkg.initializers.dataset"),
)
STAND_INS = (TORCH, XGBOOST, JAX, MPI, NOTEBOOK, MODEL_INITIALIZER, DATASET_INITIALIZER)


def module_hook(stand_in: StandIn) -> str:
    """Copy ``module_files`` from the pinned Trainer module (Go's module cache, fetched through the module proxy
    and checked against its checksum database) to the image's ``workdir``, as upstream's Dockerfile does."""
    source = module_dir(trainer.GO_MODULE, VersionSet().trainer)
    copies = [
        f'mkdir -p "$1{stand_in.workdir}/{Path(f).parent}" && cp -r "{source / f}" "$1{stand_in.workdir}/{f}"'
        for f in stand_in.module_files
    ]
    return " && ".join([*copies, f'chmod -R a+rX,u+w "$1{stand_in.workdir}"'])


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
        *([f"--customize-hook={wheels_hook(stand_in.wheels)}"] if stand_in.wheels else []),
        *([f"--customize-hook={module_hook(stand_in)}"] if stand_in.module_files else []),
        *(f"--customize-hook={hook}" for hook in stand_in.hooks),
        "--skip=output/dev",
        SUITE,
        str(out),
        ARCHIVE,
    ]


def image_config(stand_in: StandIn) -> dict[str, object]:
    served = " and ".join(dict.fromkeys(upstream_image(r, stand_in.container) for r in stand_in.runtimes))
    served = served or stand_in.upstream
    entry = list(stand_in.entrypoint)
    run: dict[str, object] = {"Entrypoint": entry} if entry else {"Cmd": ["/bin/bash"]}
    return {
        "Env": [PATH_ENV, *stand_in.env],
        "WorkingDir": stand_in.workdir,
        **run,
        "Labels": {
            "org.opencontainers.image.description": f"CPU stand-in for {served}, Debian {SUITE} packages "
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
    Needs the Debian archive: the e2e runner calls it before a session enters its own network."""
    where = folder(stand_in, root)
    return {} if all((where / n).is_file() for n in FILES) else _build(stand_in, where)


def stand_in_image(stand_in: StandIn, root: Path | None = None) -> Image:
    """The cached image; a missing one is an error naming the command that builds it."""
    where = folder(stand_in, root)
    if not all((where / n).is_file() for n in FILES):
        raise StandInError(
            f"the {stand_in.name} stand-in image is not built ({where}): run `trainer-infra sandbox runtime-images` "
            "(needs mmdebstrap and the Debian archive; `make e2e-node` does it)"
        )
    manifest, config, layer = ((where / n).read_bytes() for n in FILES)
    return Image(manifest, config, (layer,))


def digest_of(stand_in: StandIn, root: Path | None = None) -> str:
    """The cached image's manifest digest (what a pod's ``imageID`` ends with), without reading its layer."""
    return digest((folder(stand_in, root) / "manifest.json").read_bytes())


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
        # pip's own settings (index, certificates) reach the wheels hook
        env={
            **{k: v for k, v in os.environ.items() if k.startswith("PIP_")},
            "SOURCE_DATE_EPOCH": EPOCH,
            "PATH": PATH_ENV.removeprefix("PATH="),
            "PIP_NO_CACHE_DIR": "1",
        },
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


def main(argv: list[str] | None = None) -> int:
    """Build every stand-in that is missing (no options)."""
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    for each in STAND_INS:
        spent = build(each)
        print(f"[sandbox] {each.name} stand-in for {each.upstream}: {spent or 'cached'} ({folder(each)})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
