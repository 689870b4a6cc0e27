"""An admin's config must not undo tenancy by accident: configs that would hand a member the cluster are config
errors (path, reason, hint), never silent and never a traceback; the render carries the tenancy layer (policies,
NetworkPolicies, RBAC, Kueue's waitForPodsReady) the attacks are refused by."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from tests.helpers import render
from trainer_infra.core.errors import ConfigError
from trainer_infra.policy_rules.model import Subject
from trainer_infra.policy_rules.rules import check
from trainer_infra.stack.validate import validate
from trainer_infra.tenancy.admission.policy import policy_name

K8S = {"version": "1.34"}


def team(**extra: Any) -> dict[str, Any]:
    return {"name": "nlp", "members": {"users": ["alice@example.com"]}, **extra}


def issues(raw: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as err:
        validate(raw)
    return [(i.path, i.message) for i in err.value.issues]


def test_privileged_team_with_members_needs_the_explicit_override() -> None:
    found = issues({"kubernetes": K8S, "teams": [team(podSecurity="privileged")]})
    assert found == [
        (
            "teams[0].podSecurity",
            "privileged Pod Security lets any member run pods that own the node and read other teams' data",
        )
    ]
    validate({"kubernetes": K8S, "teams": [team(podSecurity="privileged", allowPrivileged=True)]})
    validate({"kubernetes": K8S, "teams": [{"name": "infra", "podSecurity": "privileged"}]})  # no members


COMPLIANT = [
    "deepspeed-distributed",
    "jax-distributed",
    "mlx-distributed",
    "torch-distributed",
    "torchtune-llama3.2-1b",
    "torchtune-llama3.2-3b",
    "torchtune-qwen2.5-1.5b",
    "xgboost-distributed",
]


def test_restricted_is_accepted_when_every_runtime_served_to_the_team_passes_it() -> None:
    """The catalog runtimes pass restricted by default (injection `pod-security`; the MPI runtimes' sshd with
    NET_BIND_SERVICE): a restricted team is accepted as soon as the stack serves only them."""
    validate({"kubernetes": K8S, "runtimes": {"enabled": COMPLIANT}, "teams": [team(podSecurity="restricted")]})


def test_restricted_is_refused_naming_each_refused_runtime_and_why() -> None:
    raw = {"kubernetes": K8S, "dataCache": {"enabled": True}, "teams": [team(podSecurity="restricted")]}
    with pytest.raises(ConfigError) as err:
        validate(raw)
    ((issue),) = err.value.issues
    assert issue.path == "teams[0].podSecurity"
    assert issue.message.startswith("restricted refuses the pods of 1 runtime(s) served to this team: ")
    # the cache runtime's own pods pass; the cache cluster the initializer creates at run time does not
    assert "torch-distributed-with-cache: data cache pods" in issue.message
    assert f"runtimes.enabled: [{', '.join(COMPLIANT)}]" in (issue.hint or "")


def test_restricted_is_refused_when_the_platform_leaves_runtimes_to_run_as_root() -> None:
    raw = {
        "kubernetes": K8S,
        "runtimes": {"enabled": ["torch-distributed"], "securityContext": {"enabled": False}},
        "teams": [team(podSecurity="restricted")],
    }
    ((path, message),) = issues(raw)
    assert path == "teams[0].podSecurity" and "torch-distributed: node pods: allowPrivilegeEscalation" in message


def test_a_team_runtime_counts_only_for_its_own_team() -> None:
    """A TrainingRuntime in one team's namespace that restricted refuses counts for that team, not for another."""
    runtimes = {"enabled": COMPLIANT, "teams": [{"team": "nlp", "runtime": "torch-distributed-with-cache"}]}
    other = {"name": "vision", "podSecurity": "restricted", "members": {"users": ["bob@example.com"]}}
    raw = {"kubernetes": K8S, "dataCache": {"enabled": True}, "runtimes": runtimes}
    found = issues({**raw, "teams": [team(podSecurity="restricted"), other]})
    assert [(p, "torch-distributed-with-cache: data cache" in m) for p, m in found] == [("teams[0].podSecurity", True)]


def test_runtime_user_ids_are_checked() -> None:
    raw = {"kubernetes": K8S, "runtimes": {"securityContext": {"runAsUser": 0}}}
    assert [p for p, _ in issues(raw)] == ["runtimes.securityContext.runAsUser"]


@pytest.mark.parametrize(
    "members,path",
    [
        ({"groups": ["system:authenticated"]}, "teams[0].members.groups[0]"),
        ({"groups": ["researchers", "system:serviceaccounts"]}, "teams[0].members.groups[1]"),
        ({"groups": ["system:serviceaccounts:ci"]}, "teams[0].members.groups[0]"),
        ({"groups": ["system:unauthenticated"]}, "teams[0].members.groups[0]"),
        ({"users": ["system:anonymous"]}, "teams[0].members.users[0]"),
    ],
)
def test_cluster_wide_member_subjects_are_refused(members: dict[str, Any], path: str) -> None:
    assert [p for p, _ in issues({"kubernetes": K8S, "teams": [{"name": "nlp", "members": members}]})] == [path]


def test_jobs_may_not_run_as_the_data_cache_initializer() -> None:
    raw = {"kubernetes": K8S, "teams": [team(jobServiceAccounts=["kubeflow-trainer-cache-initializer"])]}
    assert [p for p, _ in issues(raw)] == ["teams[0].jobServiceAccounts[0]"]


@pytest.mark.parametrize("namespace", ["kueue-system", "kubeflow-system", "kube-system"])
def test_a_team_in_a_platform_namespace_is_a_config_error(namespace: str) -> None:
    found = issues({"kubernetes": K8S, "teams": [team(namespace=namespace)]})
    assert [p for p, _ in found] == ["teams[0].namespace"]


def test_network_cidrs_are_checked() -> None:
    raw = {"kubernetes": K8S, "tenancy": {"networkPolicies": {"egress": ["10.0.0.0/33"]}}}
    assert [p for p, _ in issues(raw)] == ["tenancy.networkPolicies.egress[0]"]


# -- what the render carries ------------------------------------------------------------------------


RAW: dict[str, Any] = {
    "kubernetes": K8S,
    "storage": {"nfs": {"inClusterServer": {"enabled": True}}},
    "teams": [
        team(localQueue="nlp-q", jobServiceAccounts=["trainer"]),
        {"name": "vision", "members": {"users": ["bob@example.com"]}},
    ],
}


@pytest.fixture(scope="module")
def manifests() -> list[dict[str, Any]]:
    return render(RAW).manifests


def of_kind(manifests: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [m for m in manifests if m["kind"] == kind]


def test_render_has_a_policy_and_binding_per_kind_scoped_to_team_namespaces(manifests: list[dict[str, Any]]) -> None:
    policies = {p["metadata"]["name"]: p for p in of_kind(manifests, "ValidatingAdmissionPolicy")}
    bindings = {b["spec"]["policyName"] for b in of_kind(manifests, "ValidatingAdmissionPolicyBinding")}
    kinds = ("Pod", "JobSet", "TrainingRuntime", "TrainJob", "Service")
    assert set(policies) == bindings == {policy_name(k) for k in kinds}  # no data cache: no LWS/SA policies
    tj = policies[policy_name("TrainJob")]
    selector = tj["spec"]["matchConstraints"]["namespaceSelector"]
    assert selector == {"matchExpressions": [{"key": "trainer-platform.io/team", "operator": "Exists"}]}
    # the allow-lists are on the team namespace (members cannot edit it), not in the policy
    nlp = next(m for m in of_kind(manifests, "Namespace") if m["metadata"]["name"] == "nlp")
    assert nlp["metadata"]["annotations"] == {
        "admission.trainer-platform.io/claims": "workspace",
        "admission.trainer-platform.io/queues": "nlp-q",
        "admission.trainer-platform.io/service-accounts": "default,trainer",
    }
    suspend = [v for v in tj["spec"]["validations"] if "suspend" in v["expression"]]
    assert "system:serviceaccount:kueue-system:kueue-controller-manager" in suspend[0]["expression"]


def test_render_has_default_deny_network_policies_per_team(manifests: list[dict[str, Any]]) -> None:
    for ns in ("nlp", "vision"):
        names = {p["metadata"]["name"] for p in of_kind(manifests, "NetworkPolicy") if p["metadata"]["namespace"] == ns}
        assert {"trainer-platform-default-deny", "trainer-platform-training", "trainer-platform-dns"} <= names
    off = copy.deepcopy(RAW)
    off["tenancy"] = {"networkPolicies": {"enabled": False}}
    assert of_kind(render(off).manifests, "NetworkPolicy") == []


def test_members_read_only_their_own_cluster_queue(manifests: list[dict[str, Any]]) -> None:
    roles = {r["metadata"]["name"]: r for r in of_kind(manifests, "ClusterRole")}
    assert roles["trainer-platform-queue-reader-nlp"]["rules"] == [
        {
            "apiGroups": ["kueue.x-k8s.io"],
            "resources": ["clusterqueues"],
            "verbs": ["get", "list", "watch"],
            "resourceNames": ["nlp"],
        }
    ]
    member = roles["trainer-platform-team-member"]["rules"]
    trainjobs = next(r for r in member if r["resources"] == ["trainjobs"])
    assert "update" not in trainjobs["verbs"] and "patch" not in trainjobs["verbs"]
    assert any(r["resources"] == ["localqueues/pendingworkloads"] for r in member)


def _kueue_config(raw: dict[str, Any]) -> dict[str, Any]:
    release = next(r for r in render(raw).releases if r["name"] == "kueue")
    loaded: dict[str, Any] = yaml.safe_load(release["values"]["managerConfig"]["controllerManagerConfigYaml"])
    return loaded


def test_kueue_evicts_jobs_whose_pods_never_get_ready() -> None:
    config = _kueue_config({"kubernetes": K8S})
    assert config["waitForPodsReady"] == {
        "timeout": "10m",
        "blockAdmission": False,
        "requeuingStrategy": {
            "timestamp": "Eviction",
            "backoffBaseSeconds": 60,
            "backoffMaxSeconds": 3600,
            "backoffLimitCount": 3,
        },
    }
    forever = {"waitForPodsReady": {"timeout": "30m", "requeuing": {"backoffLimitCount": None}}}
    custom = _kueue_config({"kubernetes": K8S, "components": {"kueue": forever}})
    assert custom["waitForPodsReady"]["timeout"] == "30m"
    assert "backoffLimitCount" not in custom["waitForPodsReady"]["requeuingStrategy"]


def test_kueue_manages_leaderworkersets_when_the_data_cache_is_on() -> None:
    lws = "leaderworkerset.x-k8s.io/leaderworkerset"
    assert lws not in _kueue_config({"kubernetes": K8S})["integrations"]["frameworks"]
    assert lws in _kueue_config({"kubernetes": K8S, "dataCache": {"enabled": True}})["integrations"]["frameworks"]


# -- catalog files and the policy rule ---------------------------------------------------------------


def _runtime(pod: dict[str, Any]) -> Subject:
    job = {"name": "node", "template": {"spec": {"template": {"spec": pod}}}}
    props = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "evil"},
        "spec": {"template": {"spec": {"replicatedJobs": [job]}}},
    }
    return Subject("kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime", "evil", props)


def test_policy_rule_refuses_runtimes_that_reach_the_node() -> None:
    pod = {
        "hostNetwork": True,
        "priorityClassName": "system-node-critical",
        "volumes": [{"name": "h", "hostPath": {"path": "/"}}],
        "containers": [
            {
                "name": "node",
                "image": "x:1",
                "securityContext": {"privileged": True, "capabilities": {"add": ["SYS_ADMIN"]}},
            }
        ],
    }
    found = [v for v in check([_runtime(pod)]) if v.rule == "runtimes-stay-off-the-node"]
    assert len(found) == 5, [v.message for v in found]
    clean = {"containers": [{"name": "node", "image": "x:1"}], "priorityClassName": "training"}
    pc = Subject(
        "kubernetes:scheduling.k8s.io/v1:PriorityClass",
        "training",
        {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "training"}},
    )
    assert [v for v in check([_runtime(clean), pc]) if v.rule == "runtimes-stay-off-the-node"] == []
