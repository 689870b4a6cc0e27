"""A team's notebook (`teams[].notebook`): one interactive pod in the team namespace, run by the platform as a plain
Deployment, from which a member's kubeflow SDK submits TrainJobs and reads what the team's jobs wrote.

Why a Deployment of the platform's and not Kubeflow Notebooks or JupyterHub: those are controllers with their own
CRDs, web apps and identities (a spawner that creates pods in every team namespace), each more to install, upgrade
and bound; one pod per team needs none of it, renders as plain manifests and is judged by the same admission
policies as every pod of the team.

What holds against a hostile member (docs/data-scientists.md#a-notebook-that-submits):
- Its ServiceAccount (`NOTEBOOK`) is bound like a member (`rbac.subjects`): the SDK inside can do what a member can,
  nothing more. Its token is the one token of the team that reaches the API server.
- Only its pods reach the API server: the NetworkPolicy `trainer-platform-notebook` selects the pod label
  `NOTEBOOK_LABEL`, which the admission policies refuse everywhere else (`admission/notebook.py`): on a TrainJob's
  runtime patches and labels, a TrainingRuntime's or JobSet's pod templates, any other pod. No job runs as the
  notebook's ServiceAccount: it is not in the team's allow-list, and a pod may use it only as the notebook's (owned
  by a ReplicaSet, labelled, as this Deployment makes it). Members create neither pods nor ReplicaSets.
- Pod Security `restricted`, uid 1000 (the runtimes' uid: it reads and writes what jobs wrote), read-only root
  file system, an image admitted by exact reference.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from trainer_infra.core.images import mirror_image
from trainer_infra.core.quota import add_shares, deployment_share, pod_share
from trainer_infra.core.upstream import kubernetes
from trainer_infra.manifests import meta
from trainer_infra.teams.config import NotebookConfig
from trainer_infra.teams.model import TeamConfig

#: the notebook's ServiceAccount and Deployment, in every team namespace that has one
NOTEBOOK = "trainer-platform-notebook"
#: the label of the notebook's pods: what its NetworkPolicy selects and admission refuses on any other pod
NOTEBOOK_LABEL = "trainer-platform.io/notebook"
#: the uid and gid it runs as: the runtimes' (runtimes.securityContext), so it owns what the team's jobs wrote
NOTEBOOK_USER = 1000
HOME = "/home/notebook"
_CONTAINER = "notebook"
#: the old ReplicaSets the Deployment keeps
HISTORY = 1


def notebook_image(notebook: NotebookConfig, mirror: str | None) -> str:
    """The reference the kubelet pulls (and the admission policies admit exactly)."""
    return mirror_image(notebook.image, mirror)


def notebook_pod_labels(team: TeamConfig) -> dict[str, str]:
    return {NOTEBOOK_LABEL: "true", meta.TEAM_LABEL: team.name}


def _pod_spec(notebook: NotebookConfig, image: str, claim: str | None, mount_path: str | None) -> dict[str, Any]:
    mounts = [{"name": "home", "mountPath": HOME}, {"name": "tmp", "mountPath": "/tmp"}]
    volumes: list[dict[str, Any]] = [{"name": "home", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}]
    if claim is not None and mount_path is not None:
        mounts.append({"name": "team", "mountPath": mount_path})
        volumes.append({"name": "team", "persistentVolumeClaim": {"claimName": claim}})
    placement = {"nodeSelector": dict(sorted(notebook.node_selector.items()))} if notebook.node_selector else {}
    return {
        **placement,
        "serviceAccountName": NOTEBOOK,
        "automountServiceAccountToken": True,
        "enableServiceLinks": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": NOTEBOOK_USER,
            "runAsGroup": NOTEBOOK_USER,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [
            {
                "name": _CONTAINER,
                "image": image,
                "command": list(notebook.command),
                "env": [{"name": "HOME", "value": HOME}],
                "workingDir": mount_path or HOME,
                "resources": _resources(notebook),
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "readOnlyRootFilesystem": True,
                    "capabilities": {"drop": ["ALL"]},
                },
                "volumeMounts": mounts,
            }
        ],
        "volumes": volumes,
    }


def _resources(notebook: NotebookConfig) -> dict[str, dict[str, str]]:
    return {"requests": {"cpu": notebook.cpu, "memory": notebook.memory}, "limits": {"memory": notebook.memory}}


def notebook_quota_share(notebook: NotebookConfig) -> dict[str, Decimal]:
    """What the notebook takes from the team's ResourceQuota (`core/quota.py`): its pod (recreated, not surged),
    its Deployment and ReplicaSets, its ServiceAccount."""
    account = {"serviceaccounts": Decimal(1), "count/serviceaccounts": Decimal(1)}
    return add_shares(pod_share(_resources(notebook)), deployment_share(HISTORY), account)


def notebook_objects(
    team: TeamConfig, mirror: str | None, claim: str | None, mount_path: str | None
) -> list[dict[str, Any]]:
    """The notebook's ServiceAccount and Deployment in the team namespace (none without `teams[].notebook`).
    `claim`/`mount_path`: the team claim and where it is mounted (None: no storage)."""
    notebook = team.notebook
    if notebook is None:
        return []
    ns = team.resolved_namespace
    labels = notebook_pod_labels(team)
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": meta.metadata(NOTEBOOK, ns, {meta.TEAM_LABEL: team.name}),
    }
    deployment = {
        "apiVersion": kubernetes.APPS_API,
        "kind": "Deployment",
        "metadata": meta.metadata(NOTEBOOK, ns, {meta.TEAM_LABEL: team.name}),
        "spec": {
            "replicas": 1,
            # one pod at a time: the old one gone before the new one mounts the claim
            "strategy": {"type": "Recreate"},
            "revisionHistoryLimit": HISTORY,
            "selector": {"matchLabels": {NOTEBOOK_LABEL: "true"}},
            "template": {
                "metadata": {"labels": labels},
                "spec": _pod_spec(notebook, notebook_image(notebook, mirror), claim, mount_path),
            },
        },
    }
    return [account, deployment]
