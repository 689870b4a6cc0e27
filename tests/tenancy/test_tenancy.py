"""Onboarding a team: namespace, members, claim, quotas and secrets from a few lines of config."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.helpers import MINIMAL, render, stack_raw
from trainer_infra.core.errors import ConfigError
from trainer_infra.core.upstream import kubernetes
from trainer_infra.stack.validate import validate

EPHEMERAL = kubernetes.EPHEMERAL_STORAGE


def _by_kind(manifests: list[dict[str, Any]], namespace: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for m in manifests:
        if m["metadata"].get("namespace") == namespace or (
            m["kind"] == "Namespace" and m["metadata"]["name"] == namespace
        ):
            out.setdefault(m["kind"], []).append(m["metadata"]["name"])
    return out


def test_local_stack_onboards_two_teams_with_namespace_claim_rbac_and_secret() -> None:
    manifests = render(stack_raw("local"), "local").manifests
    for team in ("nlp", "vision"):
        kinds = _by_kind(manifests, team)
        assert kinds["Namespace"] == [team]
        assert kinds["PersistentVolumeClaim"] == ["workspace"]
        assert "trainer-platform-team-member" in kinds["RoleBinding"]
        assert kinds["Secret"] == ["wandb"]
    ns = next(m for m in manifests if m["kind"] == "Namespace" and m["metadata"]["name"] == "nlp")
    labels = ns["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    assert labels["pod-security.kubernetes.io/enforce-version"] == "v1.34"
    assert labels["trainer-platform.io/team"] == "nlp"


def test_secret_values_never_appear_in_render_output() -> None:
    token, extra = "hf_plaintext_token_123", "wandb_plaintext_456"
    raw = {**MINIMAL, "teams": [{"name": "a", "secrets": {"hfToken": token, "extra": {"wandb": {"KEY": extra}}}}]}
    rendered = render(raw)
    dumped = yaml.safe_dump([rendered.manifests, rendered.releases, rendered.resources])
    assert token not in dumped and extra not in dumped
    secrets = {m["metadata"]["name"]: m for m in rendered.manifests if m["kind"] == "Secret"}
    assert secrets["hf-token"]["stringData"] == {"HF_TOKEN": "<secret>"}
    assert secrets["wandb"]["stringData"] == {"KEY": "<secret>"}


def test_quota_and_limit_range_are_optional_per_team() -> None:
    raw = {
        **MINIMAL,
        "teams": [
            {
                "name": "a",
                "resourceQuota": {"hard": {"requests.nvidia.com/gpu": 16, "pods": 200}},
                "limitRange": {"defaultRequest": {"cpu": "500m"}, "max": {"memory": "512Gi"}},
            },
            {"name": "b"},
        ],
    }
    manifests = render(raw).manifests
    quota = next(m for m in manifests if m["kind"] == "ResourceQuota")
    assert quota["metadata"]["namespace"] == "a"
    assert quota["spec"]["hard"] == {"pods": "200", "requests.nvidia.com/gpu": "16"}
    limits = {m["metadata"]["namespace"]: m["spec"]["limits"] for m in manifests if m["kind"] == "LimitRange"}
    # the team's own keys over the platform's node-disk bound (tenancy.ephemeralStorage), in one LimitRange
    disk = {"default": {EPHEMERAL: "50Gi"}, "defaultRequest": {EPHEMERAL: "1Gi"}, "max": {EPHEMERAL: "200Gi"}}
    assert limits["a"] == [
        {
            "type": "Container",
            "default": disk["default"],
            "defaultRequest": {"cpu": "500m", **disk["defaultRequest"]},
            "max": {"memory": "512Gi", **disk["max"]},
        }
    ]
    assert limits["b"] == [{"type": "Container", **disk}]
    assert "ResourceQuota" not in _by_kind(manifests, "b")


def test_a_team_bound_on_node_disk_wins_and_the_platform_bound_can_be_off() -> None:
    teams = [{"name": "a", "limitRange": {"max": {EPHEMERAL: "400Gi"}}}, {"name": "b"}]
    limits = {
        m["metadata"]["namespace"]: m["spec"]["limits"][0]
        for m in render({**MINIMAL, "teams": teams}).manifests
        if m["kind"] == "LimitRange"
    }
    assert limits["a"]["max"] == {EPHEMERAL: "400Gi"} and limits["b"]["max"] == {EPHEMERAL: "200Gi"}
    off = {**MINIMAL, "teams": teams, "tenancy": {"ephemeralStorage": {"enabled": False}}}
    kinds = [(m["kind"], m["metadata"].get("namespace")) for m in render(off).manifests]
    assert ("LimitRange", "a") in kinds and ("LimitRange", "b") not in kinds


@pytest.mark.parametrize(
    "bound,words",
    [
        ({"defaultLimit": "100Mi"}, "below 256Mi"),
        ({"defaultRequest": "60Gi"}, "defaultRequest <= defaultLimit <= max"),
        ({"max": "10Gi"}, "defaultRequest <= defaultLimit <= max"),
    ],
)
def test_a_node_disk_bound_a_runtime_cannot_live_with_is_refused(bound: dict[str, str], words: str) -> None:
    raw = {**MINIMAL, "teams": [{"name": "a"}], "tenancy": {"ephemeralStorage": bound}}
    with pytest.raises(ConfigError) as info:
        validate(raw)
    assert "tenancy.ephemeralStorage" in str(info.value) and words in str(info.value)


@pytest.mark.parametrize(
    ("teams", "path", "message"),
    [
        ([{"name": "a"}, {"name": "b", "namespace": "a"}], "teams[1].namespace", "already teams[0]'s"),
        ([{"name": "kubeflow-system"}], "teams[0].name", "the trainer controller's namespace"),
        ([{"name": "a"}, {"name": "a", "namespace": "a2"}], "teams[1].name", "duplicate"),
        ([{"name": "a", "podSecurity": "strict"}], "teams[0].podSecurity", "'privileged', 'baseline' or 'restricted'"),
        (
            [{"name": "a", "resourceQuota": {"hard": {"requests.memory": "1Ti"}}}],
            "teams[0].resourceQuota.hard",
            "a quota on memory refuses every pod that does not request it",
        ),
    ],
    ids=["shared-namespace", "platform-namespace", "duplicate-name", "unknown-psa-level", "quota-without-defaults"],
)
def test_team_mistakes_are_reported_at_their_path(teams: list[dict[str, Any]], path: str, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        validate({**MINIMAL, "teams": teams})
    assert any(i.path == path and message in i.message for i in err.value.issues), err.value.render()
