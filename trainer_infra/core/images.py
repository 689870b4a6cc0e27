"""Image and chart references: the air-gap mirrors (where images and charts are pulled from when the cluster has
no internet), and what makes an image reference pinned."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, StringConstraints

from trainer_infra.core import kube
from trainer_infra.core.model import StrictModel
from trainer_infra.core.types import PATTERN_HELP

REGISTRY = r"^[a-zA-Z0-9.-]+(:\d+)?(/[a-z0-9._/-]+)?$"
OCI_REPOSITORY = r"^oci://[a-zA-Z0-9.-]+(:\d+)?(/[a-z0-9._/-]+)?$"
PATTERN_HELP[REGISTRY] = ("a registry host[:port][/path]", "no scheme, e.g. mirror.corp:5000/k8s")
PATTERN_HELP[OCI_REPOSITORY] = ("an OCI repository", "e.g. oci://mirror.corp/charts")


def _registry(prefix: str) -> str:
    """The full reference grammar (distribution/reference) beyond the pattern: no `//`, no `..`, a port a
    registry can listen on."""
    if (problem := kube.registry_prefix_problem(prefix.removeprefix("oci://"))) is not None:
        raise ValueError(problem)
    return prefix


RegistryHost = Annotated[str, StringConstraints(pattern=REGISTRY), AfterValidator(_registry)]
OciRepository = Annotated[str, StringConstraints(pattern=OCI_REPOSITORY), AfterValidator(_registry)]


class ImagesConfig(StrictModel):
    """`registryMirror: mirror.corp:5000/k8s` pulls `registry.k8s.io/kueue/kueue:v0.19.2` as
    `mirror.corp:5000/k8s/registry.k8s.io/kueue/kueue:v0.19.2` (the source registry stays in the path,
    so two registries never collide in one mirror)."""

    registry_mirror: RegistryHost | None = None


class ChartsConfig(StrictModel):
    """`repositoryMirror: oci://mirror.corp/charts` pulls `oci://registry.k8s.io/kueue/charts/kueue` as
    `oci://mirror.corp/charts/registry.k8s.io/kueue/charts/kueue`."""

    repository_mirror: OciRepository | None = None


def _split_registry(ref: str) -> tuple[str, str]:
    first, _, rest = ref.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return first, rest
    # Docker Hub short names: `busybox` → docker.io/library/busybox
    return "docker.io", ref if "/" in ref else f"library/{ref}"


def mirror_image(image: str, mirror: str | None) -> str:
    if not mirror:
        return image
    host, path = _split_registry(image)
    return f"{mirror.rstrip('/')}/{host}/{path}"


def mirror_chart(chart: str, mirror: str | None) -> str:
    if not mirror:
        return chart
    return f"{mirror.rstrip('/')}/{chart.removeprefix('oci://')}"


def split_image(image: str) -> tuple[str, str]:
    """`registry.k8s.io/jobset/jobset:v0.12.0` → (`registry.k8s.io/jobset/jobset`, `v0.12.0`)."""
    name, _, tag = image.rpartition(":")
    if not name or "/" in tag:
        raise ValueError(f"image {image!r} has no tag")
    return name, tag
