"""Team members can do everything the real `kubeflow` SDK does, in their own namespace only."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import MINIMAL, render
from tests.sdk_recorder import public_methods, record_sdk_calls
from tests.tenancy.rbac_eval import Authorizer, Identity, Request, request_from_http

AUTHENTICATED = ("system:authenticated",)
RAW: dict[str, Any] = {
    **MINIMAL,
    "teams": [
        {
            "name": "team-a",
            "members": {"users": ["alice"], "groups": ["a-researchers"], "serviceAccounts": ["notebook"]},
        },
        {"name": "team-b", "members": {"users": ["bob"], "manageRuntimes": True}},
    ],
}


@pytest.fixture(scope="module")
def authz() -> Authorizer:
    return Authorizer(render(RAW).manifests)


@pytest.fixture(scope="module")
def sdk_requests() -> dict[str, set[Request]]:
    out = {}
    for ns in ("team-a", "team-b"):
        calls, ran = record_sdk_calls(ns)
        assert ran == public_methods(), "every public TrainerClient method is exercised (a new one must be added)"
        out[ns] = {request_from_http(method, url) for method, url in calls}
    return out


def test_recorded_calls_cover_what_the_sdk_does(sdk_requests: dict[str, set[Request]]) -> None:
    seen = {(r.verb, r.resource) for r in sdk_requests["team-a"]}
    # A sanity floor, not the list under test: the list comes from the recorder.
    assert {("create", "trainjobs"), ("delete", "trainjobs"), ("list", "clustertrainingruntimes")} <= seen
    assert ("get", "pods/log") in seen and ("get", "configmaps") in seen


@pytest.mark.parametrize(
    "who",
    [
        Identity("alice", AUTHENTICATED),
        Identity("someone", ("a-researchers", *AUTHENTICATED)),
        Identity.service_account("team-a", "notebook"),
    ],
    ids=["user", "group", "service-account"],
)
def test_every_sdk_call_is_allowed_for_a_member(
    authz: Authorizer, sdk_requests: dict[str, set[Request]], who: Identity
) -> None:
    denied = sorted(str(r) for r in sdk_requests["team-a"] if not authz.allowed(who, r))
    assert denied == []


def test_a_member_of_team_a_is_denied_in_team_b(authz: Authorizer, sdk_requests: dict[str, set[Request]]) -> None:
    alice, bob = Identity("alice", AUTHENTICATED), Identity("bob", AUTHENTICATED)
    in_b = [r for r in sdk_requests["team-b"] if r.namespace == "team-b"]
    assert in_b, "the SDK works in the TrainJob namespace"
    assert [str(r) for r in in_b if authz.allowed(alice, r)] == []
    assert [str(r) for r in in_b if not authz.allowed(bob, r)] == []
    stranger = Identity("mallory", AUTHENTICATED)
    assert [str(r) for r in sdk_requests["team-a"] if authz.allowed(stranger, r)] == []


def test_runtimes_are_managed_only_where_allowed_and_nothing_cluster_wide_writes(authz: Authorizer) -> None:
    create = {ns: Request("create", "trainer.kubeflow.org", "trainingruntimes", ns) for ns in ("team-a", "team-b")}
    assert authz.allowed(Identity("bob"), create["team-b"])
    assert not authz.allowed(Identity("alice"), create["team-a"]), "team-a did not set manageRuntimes"
    assert not authz.allowed(
        Identity("bob"), Request("create", "trainer.kubeflow.org", "clustertrainingruntimes", None)
    )
    assert not authz.allowed(Identity("alice"), Request("get", "", "secrets", "team-a", "hf-token"))
    assert authz.cluster_wide_writes() == []
