"""Admission rules on where a team's images come from (`tenancy.images`, `tenancy/images.py`): every container of
every pod spec a member submits, and a TrainJob's own `spec.trainer.image`."""

from __future__ import annotations

from trainer_infra.admission.cel import lit
from trainer_infra.admission.model import AdmissionRule, AdmissionSettings, AdmittedKind, ImageAdmission
from trainer_infra.tenancy.images import DEFAULT_REGISTRY, DEFAULT_REPOSITORY, DIGEST_MARK


def _first(image: str) -> str:
    return f"{image}.split('/')[0]"


def _resolved(image: str) -> str:
    """CEL: the reference as the container runtime pulls it (Docker Hub short names made whole)."""
    first = _first(image)
    host = f"({first}.contains('.') || {first}.contains(':') || {first} == 'localhost')"
    return (
        f"({image}.contains('/') && {host} ? {image} : "
        f"({image}.contains('/') ? '{DEFAULT_REGISTRY}/' + {image} : "
        f"'{DEFAULT_REGISTRY}/{DEFAULT_REPOSITORY}/' + {image}))"
    )


def image_allowed(image: str, bound: ImageAdmission) -> str:
    """CEL: `image` (an expression) is one of the platform's own, or from an allowed registry (and pinned by
    digest when the stack asks)."""
    checks = []
    if bound.registries:
        prefixes = lit([f"{p}/" for p in bound.registries])
        checks.append(f"{prefixes}.exists(p, {_resolved(image)}.startsWith(p))")
    if bound.require_digests:
        checks.append(f"{image}.contains('{DIGEST_MARK}')")
    return f"({image} in {lit(list(bound.platform_images))} || ({' && '.join(checks)}))"


def _pod_images(kind: AdmittedKind, settings: AdmissionSettings) -> str | None:
    if settings.images is None:
        return None
    ok = image_allowed("c.image", settings.images)
    return " && ".join(f"(!has(s.{f}) || s.{f}.all(c, !has(c.image) || {ok}))" for f in kind.pod.containers)


def _trainer_image(kind: AdmittedKind, settings: AdmissionSettings) -> str | None:
    if settings.images is None:
        return None
    image = "object.spec.trainer.image"
    return f"!has(object.spec.trainer) || !has({image}) || {image_allowed(image, settings.images)}"


def _message(settings: AdmissionSettings) -> str:
    bound = settings.images
    if bound is None:
        return ""
    allowed = ", ".join(bound.registries) if bound.registries else "any registry"
    digest = f", pinned by digest ({DIGEST_MARK}…)" if bound.require_digests else ""
    return (
        f"runs an image the platform does not allow: team images must come from {allowed}{digest} "
        "(tenancy.images.allowedRegistries; ask your platform team to add a registry)"
    )


POD_IMAGES = AdmissionRule(
    "images", ("Pod", "JobSet", "TrainingRuntime", "TrainJob"), _message, _pod_images, per_pod=True
)
TRAINER_IMAGE = AdmissionRule("trainerImage", ("TrainJob",), _message, _trainer_image)
