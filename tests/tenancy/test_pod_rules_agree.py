"""The one pod-rule vocabulary (`manifests/pod_rules.py`) is read four ways: the admission CEL (evaluated here
as the API server does), the offline policy (`pod_spec_problems`: catalog loader and CrossGuard), `migrate`
(which words the node-reaching rules as Pod Security does) and the Pod Security `restricted` port. On every pod
of the table they refuse the same pods, and every rule of the vocabulary has a pod here that only it refuses."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.tenancy import cel_admission
from trainer_infra.admission.model import AdmissionSettings, TeamAdmission
from trainer_infra.core.upstream import trainer
from trainer_infra.manifests.pod_rules import RULES, pod_spec_problems
from trainer_infra.manifests.pod_security_standards import restricted_problems
from trainer_infra.migrate import tenancy as migrate
from trainer_infra.tenancy.admission.policy import admission_objects, namespace_annotations, policy_name

TEAM = TeamAdmission("vision", claims=("workspace",), queues=("q",), service_accounts=("notebook",))
SETTINGS = AdmissionSettings(
    teams=(TEAM,), trainer_identity="trainer", kueue_identity="kueue", priority_classes=("high",)
)
#: a container Pod Security `restricted` admits
CONTAINER: dict[str, Any] = {
    "name": "node",
    "image": "example.com/train:1.0",
    "securityContext": {
        "allowPrivilegeEscalation": False,
        "runAsNonRoot": True,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    },
}
BASE: dict[str, Any] = {
    "containers": [CONTAINER],
    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "workspace"}}, {"name": "tmp", "emptyDir": {}}],
}


def _with(**fields: Any) -> dict[str, Any]:
    return {**copy.deepcopy(BASE), **fields}


def _token(name: str, audience: str) -> dict[str, Any]:
    return {"name": name, "projected": {"sources": [{"serviceAccountToken": {"audience": audience, "path": "token"}}]}}


def _container(**security: Any) -> dict[str, Any]:
    c = copy.deepcopy(CONTAINER)
    c["securityContext"].update(security)
    return _with(containers=[c])


#: (pod, the vocabulary rule that refuses it or None, whether Pod Security `restricted` refuses it too)
TABLE: list[tuple[str, dict[str, Any], str | None, bool]] = [
    ("honest", _with(), None, False),
    ("team service account", _with(serviceAccountName="notebook"), None, False),
    ("platform priority class", _with(priorityClassName="high"), None, False),
    ("nfs volume", _with(volumes=[{"name": "all", "nfs": {"server": "nfs", "path": "/"}}]), "volumes", True),
    ("hostPath volume", _with(volumes=[{"name": "root", "hostPath": {"path": "/"}}]), "volumes", True),
    ("csi volume", _with(volumes=[{"name": "c", "csi": {"driver": "x"}}]), "volumes", False),
    ("another claim", _with(volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "other"}}]), "claims", False),
    (
        "two volumes of one claim",
        _with(volumes=[*BASE["volumes"], {"name": "more", "persistentVolumeClaim": {"claimName": "workspace"}}]),
        "claimOnce",
        False,
    ),
    ("hostNetwork", _with(hostNetwork=True), "host", True),
    ("hostIPC", _with(hostIPC=True), "host", True),
    ("privileged", _container(privileged=True), "privileged", True),
    ("SYS_ADMIN", _container(capabilities={"drop": ["ALL"], "add": ["SYS_ADMIN"]}), "privileged", True),
    # the one capability the platform lets a container add back (the MPI runtimes' sshd), as `restricted` does
    ("NET_BIND_SERVICE", _container(capabilities={"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}), None, False),
    # an attacker's spellings and company: any other capability beside it, another spelling, ALL, a baseline one
    *(
        (
            f"NET_BIND_SERVICE + {cap}",
            _container(capabilities={"drop": ["ALL"], "add": ["NET_BIND_SERVICE", cap]}),
            "privileged",
            True,
        )
        for cap in ("SYS_ADMIN", "NET_RAW", "NET_ADMIN", "ALL", "CAP_NET_BIND_SERVICE", "net_bind_service", "CHOWN")
    ),
    ("NET_RAW alone", _container(capabilities={"drop": ["ALL"], "add": ["NET_RAW"]}), "privileged", True),
    (
        "NET_BIND_SERVICE in an init container",
        {
            **_with(),
            "initContainers": [
                {
                    **CONTAINER,
                    "name": "init",
                    "securityContext": {
                        **CONTAINER["securityContext"],
                        "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE", "SYS_PTRACE"]},
                    },
                }
            ],
        },
        "privileged",
        True,
    ),
    ("container hostProcess", _container(windowsOptions={"hostProcess": True}), "privileged", True),
    ("pod hostProcess", _with(securityContext={"windowsOptions": {"hostProcess": True}}), "privileged", True),
    (
        "privileged init container",
        {**_with(), "initContainers": _container(privileged=True)["containers"]},
        "privileged",
        True,
    ),
    ("hostPort", _with(containers=[{**CONTAINER, "ports": [{"containerPort": 80, "hostPort": 80}]}]), "hostPort", True),
    ("nodeName", _with(nodeName="gpu-node-1"), "nodeName", False),
    ("system priority class", _with(priorityClassName="system-node-critical"), "priorityClassName", False),
    ("foreign service account", _with(serviceAccountName="admin"), "serviceAccount", False),
    # a token for any other audience (a vault, a cloud) stays a member's own business
    ("token for another audience", _with(volumes=[_token("t", "vault")]), None, False),
    ("status token volume", _with(volumes=[_token(trainer.STATUS_TOKEN_VOLUME, "vault")]), "statusServer", False),
    (
        "status audience",
        _with(volumes=[_token("t", trainer.status_audience("vision", "other"))]),
        "statusServer",
        False,
    ),
    ("status CA", _with(volumes=[{"name": "ca", "configMap": {"name": "other-tls-config"}}]), "statusServer", False),
    (
        "status URL",
        _with(containers=[{**CONTAINER, "env": [{"name": trainer.STATUS_URL_ENV, "value": "x"}]}]),
        "statusServer",
        False,
    ),
]
#: what `migrate` cannot judge: the target stack's PriorityClasses are not part of its view of the target
MIGRATE_BLIND = {"priorityClassName"}


def _cel(pod: dict[str, Any]) -> list[str]:
    (policy,) = [
        o
        for o in admission_objects(SETTINGS)
        if o["metadata"]["name"] == policy_name("TrainingRuntime") and o["kind"] == "ValidatingAdmissionPolicy"
    ]
    runtime = {
        "metadata": {"name": "rt", "namespace": "vision"},
        "spec": {
            "template": {
                "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": pod}}}}]}
            }
        },
    }
    return cel_admission.refusals(
        policy, runtime, namespace="vision", namespace_annotations=namespace_annotations(TEAM)
    )


@pytest.mark.parametrize(("name", "pod", "rule", "pod_security"), TABLE, ids=[row[0] for row in TABLE])
def test_the_four_readings_agree(name: str, pod: dict[str, Any], rule: str | None, pod_security: bool) -> None:
    cel = _cel(pod)
    offline = pod_spec_problems(
        pod, ("high",), claims=TEAM.claims, service_accounts=("default", *TEAM.service_accounts)
    )
    ctx = migrate.Context(
        "vision", "vision", "restricted:v1.34", claims=TEAM.claims, service_accounts=TEAM.service_accounts
    )
    migrated = migrate.refusals(pod, ctx)
    if rule is None:
        assert (cel, offline, migrated) == ([], [], [])
    else:
        (message,) = cel
        static = next(r for r in RULES if r.name == rule).message.split("{")[0]
        assert message.startswith(f"TrainingRuntime rt refused: {static}")
        assert offline, "the offline policy admits what admission refuses"
        assert bool(migrated) == (rule not in MIGRATE_BLIND), migrated
    assert bool(restricted_problems(pod)) == pod_security


def test_every_vocabulary_rule_has_a_pod_only_it_refuses() -> None:
    assert {row[2] for row in TABLE} - {None} == {r.name for r in RULES}
