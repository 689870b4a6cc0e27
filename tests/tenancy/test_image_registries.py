"""A member's image comes from the registries the platform allows (`tenancy.images`): every container of every pod
spec they can submit, and spec.trainer.image, refused with the allowed prefixes named; the platform's own images
always pass. Evaluated on the stack's own rendered policies."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import plan_of, stack_raw, with_changes
from tests.tenancy import cel_admission
from trainer_infra.core.errors import ConfigError
from trainer_infra.manifests.runtime import images_of
from trainer_infra.stack.validate import validate
from trainer_infra.tenancy.admission.policy import policy_name

Obj = dict[str, Any]
MIRROR = "mirror.corp:5000/k8s"


def _local(**images: Any) -> dict[str, Any]:
    """The local stack with `tenancy.images` as given (its own list dropped)."""
    raw = stack_raw("local")
    return with_changes(raw, tenancy={**raw.get("tenancy", {}), "images": images})


def _stack(**images: Any) -> dict[str, Any]:
    return with_changes(_local(**images), images={"registryMirror": MIRROR})


def _policies(raw: dict[str, Any]) -> tuple[dict[str, Obj], dict[str, dict[str, str]], list[Obj]]:
    manifests = [o.manifest for o in plan_of(raw).objects]
    policies = {m["metadata"]["name"]: m for m in manifests if m["kind"] == "ValidatingAdmissionPolicy"}
    namespaces = {
        m["metadata"]["name"]: m["metadata"].get("annotations", {}) for m in manifests if m["kind"] == "Namespace"
    }
    runtimes = [m for m in manifests if m["kind"] == "ClusterTrainingRuntime"]
    return policies, namespaces, runtimes


@pytest.fixture(scope="module")
def mirrored() -> tuple[dict[str, Obj], dict[str, dict[str, str]], list[Obj]]:
    return _policies(_stack())


TEAM_NS = "nlp"


def _refusals(rendered: tuple[dict[str, Obj], dict[str, dict[str, str]], list[Obj]], kind: str, obj: Obj) -> list[str]:
    """The image refusals of the team's policy for `kind` (the other rules are other tests' business)."""
    policies, namespaces, _ = rendered
    refused = cel_admission.refusals(
        policies[policy_name(kind)], obj, namespace=TEAM_NS, namespace_annotations=namespaces[TEAM_NS]
    )
    return [r for r in refused if "image the platform does not allow" in r]


def _pod(*images: str, init: str | None = None) -> Obj:
    spec: Obj = {"containers": [{"name": f"c{i}", "image": image} for i, image in enumerate(images)]}
    if init is not None:
        spec["initContainers"] = [{"name": "init", "image": init}]
    return {"metadata": {"name": "p"}, "spec": spec}


def test_an_image_from_another_registry_is_refused_naming_the_allowed_prefixes(mirrored: Any) -> None:
    refused = _refusals(mirrored, "Pod", _pod("docker.io/attacker/miner:latest"))
    assert len(refused) == 1
    assert MIRROR in refused[0] and "tenancy.images.allowedRegistries" in refused[0]
    # a Docker Hub short name is docker.io's, the init container is judged too, and the prefix ends at a `/`
    assert _refusals(mirrored, "Pod", _pod("busybox:1.36"))
    assert _refusals(mirrored, "Pod", _pod(f"{MIRROR}/ok:1", init="attacker/miner"))
    assert _refusals(mirrored, "Pod", _pod(f"{MIRROR}-evil/miner:1"))
    assert _refusals(mirrored, "Pod", _pod(f"{MIRROR}evil/miner:1"))
    assert _refusals(mirrored, "Pod", _pod(f"{MIRROR}/x:1", f"{MIRROR.upper()}/y:1")), "hosts are not case-folded"


def test_images_through_the_mirror_pass(mirrored: Any) -> None:
    assert _refusals(mirrored, "Pod", _pod(f"{MIRROR}/docker.io/pytorch/pytorch:2.10.0")) == []


def test_every_path_a_member_submits_an_image_through_is_judged(mirrored: Any) -> None:
    bad, good = "ghcr.io/attacker/x:1", f"{MIRROR}/ghcr.io/me/x:1"

    def trainjob(trainer_image: str, patch_image: str) -> Obj:
        pod = {"containers": [{"name": "node", "image": patch_image}]}
        patch = {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": pod}}}}]}
        return {
            "metadata": {"name": "tj", "labels": {"kueue.x-k8s.io/queue-name": "default"}},
            "spec": {
                "runtimeRef": {"name": "torch-distributed"},
                "trainer": {"image": trainer_image},
                "runtimePatches": [{"manager": "me", "trainingRuntimeSpec": {"template": {"spec": patch}}}],
            },
        }

    assert len(_refusals(mirrored, "TrainJob", trainjob(bad, good))) == 1, "spec.trainer.image"
    assert len(_refusals(mirrored, "TrainJob", trainjob(good, bad))) == 1, "a runtime patch's container"
    assert _refusals(mirrored, "TrainJob", trainjob(good, good)) == []
    job = {"name": "node", "template": {"spec": {"template": {"spec": {"containers": [{"name": "n", "image": bad}]}}}}}
    jobset = {"metadata": {"name": "js"}, "spec": {"replicatedJobs": [job]}}
    runtime = {"metadata": {"name": "rt"}, "spec": {"template": {"spec": {"replicatedJobs": [job]}}}}
    for kind, obj in (("JobSet", jobset), ("TrainingRuntime", runtime)):
        assert _refusals(mirrored, kind, obj), kind


def test_the_platforms_own_images_pass_even_where_a_member_could_not_use_their_registry() -> None:
    rendered = _policies(_stack(allowedRegistries=["registry.corp/ml"], requireDigests=True))
    _, _, runtimes = rendered
    images = sorted({image for rt in runtimes for image in images_of(rt)})
    assert images and all(i.startswith(f"{MIRROR}/") and "@sha256:" not in i for i in images)
    for image in images:
        assert _refusals(rendered, "Pod", _pod(image)) == [], image
    # the explicit list adds to the mirror; digests are then required of members' images
    assert _refusals(rendered, "Pod", _pod("registry.corp/ml/trainer:1"))
    assert _refusals(rendered, "Pod", _pod("registry.corp/ml/trainer@sha256:" + "a" * 64)) == []
    assert _refusals(rendered, "Pod", _pod("registry.corp/mlx/trainer@sha256:" + "a" * 64))


def test_without_a_mirror_or_list_any_registry_is_allowed_and_validate_says_so() -> None:
    raw = _local()
    assert raw.get("images", {}).get("registryMirror") is None
    warnings = validate(raw).warnings
    assert any(w.startswith("tenancy.images.allowedRegistries") for w in warnings)
    policies, _, _ = _policies(raw)
    pod_policy = policies[policy_name("Pod")]
    assert "does not allow" not in str(pod_policy["spec"]["validations"])
    assert not any("allowedRegistries" in w for w in validate(_stack()).warnings)


@pytest.mark.parametrize(
    "entry,words",
    [
        ("pytorch", "not a registry host"),
        ("https://registry.corp", "registry host"),
        ("registry.corp/ML", "registry host"),
    ],
)
def test_an_entry_that_is_not_a_registry_prefix_is_refused_with_its_path(entry: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate(_stack(allowedRegistries=["registry.corp", entry]))
    text = str(info.value)
    assert "tenancy.images.allowedRegistries[1]" in text and words in text


def test_an_empty_list_is_refused_not_read_as_any_registry() -> None:
    with pytest.raises(ConfigError) as info:
        validate(_stack(allowedRegistries=[]))
    assert "tenancy.images.allowedRegistries" in str(info.value)
