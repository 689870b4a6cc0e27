"""Where the images of a team's pods may come from (`tenancy.images`).

A member chooses the image of every container they submit; without a bound, a job may run anything the nodes can
pull (a miner from Docker Hub, an image that was never scanned). The bound is a list of registry prefixes, matched
as the container runtime resolves a reference (`busybox` is `docker.io/library/busybox`), on a path boundary (the
prefix `mirror.corp/k8s` does not admit `mirror.corp/k8s-other/x`). The platform's own images (the served
runtimes', the data cache's) always pass, by exact reference.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

from trainer_infra.admission.model import ImageAdmission
from trainer_infra.core.images import RegistryHost
from trainer_infra.core.model import StrictModel

#: The registry Docker's short names resolve to (`busybox` → `docker.io/library/busybox`), as containerd does.
DEFAULT_REGISTRY = "docker.io"
DEFAULT_REPOSITORY = "library"
#: The digest form a pinned reference ends with.
DIGEST_MARK = "@sha256:"


def is_registry_host(component: str) -> bool:
    """The first path component names a registry (not a Docker Hub user) when it has a dot or a port, or is
    `localhost`: distribution/reference's `splitDockerDomain`."""
    return "." in component or ":" in component or component == "localhost"


def _registry_prefix(prefix: str) -> str:
    host = prefix.split("/", 1)[0]
    if not is_registry_host(host):
        raise ValueError(
            f"{host!r} is not a registry host (it has no dot or port, so a container runtime reads it as a "
            f"Docker Hub user): write the registry, e.g. {DEFAULT_REGISTRY}/{prefix}"
        )
    return prefix


RegistryPrefix = Annotated[RegistryHost, AfterValidator(_registry_prefix)]


class ImagePolicyConfig(StrictModel):
    """Where the images of a team's pods may come from: every container image in a team namespace (TrainJob
    trainer images, runtime patches, TrainingRuntimes, JobSets, Pods) must start with one of these prefixes."""

    allowed_registries: list[RegistryPrefix] | None = Field(
        default=None,
        min_length=1,
        description="Registry prefixes (`host[:port][/path]`) team images must come from. Default: "
        "`images.registryMirror` when it is set; otherwise any registry (`validate` warns).",
    )
    require_digests: bool = Field(
        default=False,
        description="Refuse team images not pinned by digest (`…@sha256:…`); the platform's own images pass.",
    )


def image_admission(
    config: ImagePolicyConfig, mirror: str | None, platform_images: tuple[str, ...]
) -> ImageAdmission | None:
    """The effective bound (None: any registry). The mirror always counts: the platform's images come from it."""
    registries = set(config.allowed_registries or ())
    if mirror:
        registries.add(mirror.rstrip("/"))
    if not registries and not config.require_digests:
        return None
    return ImageAdmission(tuple(sorted(registries)), config.require_digests, tuple(sorted(set(platform_images))))


def image_warnings(config: ImagePolicyConfig, mirror: str | None, teams: int) -> list[str]:
    """Say so when a member's job may run an image from any registry (a stack without teams has no members)."""
    if teams and config.allowed_registries is None and not mirror:
        return [
            "tenancy.images.allowedRegistries: not set and images.registryMirror is not set: team jobs may run "
            "images from any registry the nodes reach; set the registries your team images come from"
        ]
    return []
