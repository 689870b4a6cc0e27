"""Onboarding a team: namespace, members, claim, quotas and secrets from a few lines of config."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.helpers import MINIMAL, render, stack_raw
from trainer_infra.core.errors import ConfigError
from trainer_infra.stack.validate import validate


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
    limits = next(m for m in manifests if m["kind"] == "LimitRange")["spec"]["limits"]
    assert limits == [{"type": "Container", "defaultRequest": {"cpu": "500m"}, "max": {"memory": "512Gi"}}]
    assert "ResourceQuota" not in _by_kind(manifests, "b")


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
