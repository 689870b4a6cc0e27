"""A v1 job a team member could not submit is refused, with the API server's own wording, whatever
`--allow-lossy` says."""

from __future__ import annotations

from typing import Any

import pytest

from tests.migrate.helpers import job, run
from trainer_infra.migrate.mapping import Disposition
from trainer_infra.migrate.result import Options, Status

PT = ("kubeflow.org/v1", "PyTorchJob")
EVERYTHING = Options(allow_lossy=("spec", "metadata"))


def with_pod(**pod: Any) -> dict[str, Any]:
    obj = job(*PT)
    obj["spec"]["pytorchReplicaSpecs"].pop("Worker")
    obj["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"].update(pod)
    return obj


def main(**fields: Any) -> dict[str, Any]:
    return {"name": "pytorch", "image": "docker.io/example/train:1.0", "command": ["torchrun", "t.py"], **fields}


@pytest.mark.parametrize(
    ("pod", "message"),
    [
        (
            {"volumes": [{"name": "data", "hostPath": {"path": "/data"}}]},
            'pods "train-master-0" is forbidden: violates PodSecurity "baseline:v1.34": '
            'hostPath volumes (volume "data")',
        ),
        (
            {"volumes": [{"name": "a", "hostPath": {"path": "/a"}}, {"name": "b", "hostPath": {"path": "/b"}}]},
            'violates PodSecurity "baseline:v1.34": hostPath volumes (volumes "a", "b")',
        ),
        (
            {"containers": [main(securityContext={"privileged": True})]},
            'violates PodSecurity "baseline:v1.34": privileged (container "pytorch" must not set '
            "securityContext.privileged=true)",
        ),
        (
            {"hostNetwork": True, "hostPID": True},
            'violates PodSecurity "baseline:v1.34": host namespaces (hostNetwork=true, hostPID=true)',
        ),
        (
            {"containers": [main(securityContext={"capabilities": {"add": ["SYS_ADMIN", "CHOWN"]}})]},
            'non-default capabilities (container "pytorch" must not include "SYS_ADMIN" in '
            "securityContext.capabilities.add)",
        ),
        (
            {"containers": [main(securityContext={"capabilities": {"add": ["NET_BIND_SERVICE", "CHOWN"]}})]},
            "container \"pytorch\": capabilities.add ['CHOWN'] is refused in team namespaces",
        ),
        (
            {"containers": [main(securityContext={"allowPrivilegeEscalation": True})]},
            "allowPrivilegeEscalation=true is refused",
        ),
        (
            {"volumes": [{"name": "e", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]},
            'volume "e": inline ephemeral volumes are refused',
        ),
        (
            {"containers": [main(ports=[{"containerPort": 80, "hostPort": 80}])]},
            'hostPort (container "pytorch" uses hostPort 80)',
        ),
        (
            {"volumes": [{"name": "export", "nfs": {"server": "nfs.storage", "path": "/"}}]},
            'volume "export": inline nfs volumes are refused in team namespaces',
        ),
    ],
)
def test_refused_with_the_admission_message(pod: dict[str, Any], message: str) -> None:
    r = run(with_pod(**pod), options=EVERYTHING)
    assert r.status == Status.REFUSED and r.trainjob is None
    assert message in r.refusal
    assert all(
        f.path.startswith("spec.pytorchReplicaSpecs.Master.template.spec.")
        for f in r.findings
        if f.disposition is Disposition.TENANCY
    )


def test_only_the_teams_claims_and_service_accounts() -> None:
    obj = with_pod(volumes=[{"name": "ws", "persistentVolumeClaim": {"claimName": "workspace"}}])
    assert run(obj).status == Status.CLEAN
    obj["metadata"]["namespace"] = "ml-legacy"
    r = run(obj, options=Options(namespace_map={"ml-legacy": "nlp"}))
    assert r.status == Status.REFUSED
    assert "claim 'workspace' lives in namespace 'ml-legacy'" in r.refusal
    other = with_pod(volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "scratch"}}])
    assert "claim 'scratch' is not one of the team's claims (workspace)" in run(other).refusal
    sa = with_pod(serviceAccountName="kubeflow-trainer-cache-initializer")
    assert "not one of the team's service accounts (default)" in run(sa).refusal
    assert run(with_pod(serviceAccountName="default")).status == Status.CLEAN


def test_safe_pods_pass() -> None:
    obj = with_pod(
        hostNetwork=False,
        volumes=[
            {"name": "ws", "persistentVolumeClaim": {"claimName": "workspace"}},
            {"name": "t", "emptyDir": {}},
            {"name": "c", "configMap": {"name": "cfg"}},
            {"name": "s", "secret": {"secretName": "hf-token"}},
        ],
        containers=[
            main(
                securityContext={
                    "capabilities": {"drop": ["ALL"]},
                    "privileged": False,
                    "allowPrivilegeEscalation": False,
                }
            )
        ],
    )
    assert run(obj).status == Status.CLEAN
