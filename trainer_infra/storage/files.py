"""`storage.files`: the team's read-only file service, how a member gets back what their jobs wrote.

A member may not exec into pods or create pods, and a job's pod is gone when it ends: without this, what a job
wrote to the team claim (`$CHECKPOINT_DIR` under `jobs/<job>/`) stays where only an admin reaches it. Per team
namespace, a Deployment runs `file_server.py` (this package; mounted from a ConfigMap the platform owns) over the
team claim mounted **read-only**, as a non-root user, with no ServiceAccount token and no capability, behind a
ClusterIP Service. Members reach it only through the API server's service proxy
(`/api/v1/namespaces/<ns>/services/<SERVICE>/proxy/<path>`): the member role grants `get` on `services/proxy` for
that one Service name and nothing else, and the API server authorizes a proxied GET/HEAD as `get`, POST as `create`,
PUT as `update`, PATCH as `patch`, DELETE as `delete` (k8s.io/apiserver pkg/endpoints/request/requestinfo.go,
`NewRequestInfo`), so a member can read and nothing else; the server itself answers only GET and HEAD. No new
network path opens: the teams' default-deny NetworkPolicies keep every pod away from it; the API server's proxy
connection comes from the node or the control plane (`tenancy.networkPolicies.apiServerSources`).

Why not an export step to object storage: it needs credentials per team in the cluster and a bucket per team
outside it, and a member's job could already write there itself; the claim is where the checkpoint is.
"""

from __future__ import annotations

import hashlib
from decimal import Decimal
from pathlib import Path
from typing import Any

from pydantic import Field

from trainer_infra.core.images import mirror_image
from trainer_infra.core.model import StrictModel
from trainer_infra.core.objects import ManagedObject
from trainer_infra.core.quota import add_shares, deployment_share, pod_share
from trainer_infra.core.upstream import kubernetes, python
from trainer_infra.manifests import meta
from trainer_infra.teams.model import TeamConfig
from trainer_infra.teams.protection import TEAM_LABEL

#: the Deployment, its Service and its ConfigMap in every team namespace (the member role names the Service)
NAME = "trainer-platform-files"
PORT = 8080
#: the label that selects the server's pods (the Service, the admission rule that lets them run)
POD_LABELS = {kubernetes.APP_NAME: NAME}
SERVER_FILE = "file_server.py"
CODE_MOUNT = "/srv/trainer-platform"
ROOT = "/files"
CLAIM_VOLUME, CODE_VOLUME = "claim", "code"
#: on the pod template: the server code's hash
CODE_ANNOTATION = "trainer-platform.io/file-server"
#: the uid and gid the server reads as when runtimes.securityContext is off (the runtimes' own default otherwise)
DEFAULT_ID = 1000
#: one server pod's container resources
RESOURCES = {
    "requests": {"cpu": "10m", "memory": "32Mi", kubernetes.EPHEMERAL_STORAGE: "16Mi"},
    "limits": {"cpu": "500m", "memory": "128Mi", kubernetes.EPHEMERAL_STORAGE: "64Mi"},
}
#: the old ReplicaSets the Deployment keeps
HISTORY = 1


def quota_share() -> dict[str, Decimal]:
    """What the service takes from a namespace ResourceQuota (`core/quota.py`): one pod (recreated, not surged),
    its Deployment and ReplicaSets, a Service and a ConfigMap (counted under their short and `count/` names)."""
    objects = {key: Decimal(1) for key in ("services", "count/services", "configmaps", "count/configmaps")}
    return add_shares(pod_share(RESOURCES), deployment_share(HISTORY), objects)


class FilesConfig(StrictModel):
    """A read-only file service per team over the team claim, reached through the API server's service proxy:
    members list and download what their jobs wrote (docs/data-scientists.md#getting-the-model-out)."""

    enabled: bool = Field(
        default=True,
        description="Run it in every team namespace (members get `get` on its `services/proxy`, nothing else).",
    )
    node_selector: dict[str, str] = Field(
        default_factory=dict,
        description="Where its pods run (e.g. your system pool's label); it needs a node that mounts the claim.",
    )


def image(mirror: str | None) -> str:
    """The server's image as the nodes pull it."""
    return mirror_image(python.IMAGE, mirror)


def server_code() -> str:
    return (Path(__file__).parent / SERVER_FILE).read_text()


def _pod_spec(claim: str, mirror: str | None, uid: int, gid: int, node_selector: dict[str, str]) -> dict[str, Any]:
    read_only = {"readOnly": True}
    container = {
        "name": "files",
        "image": image(mirror),
        "command": ["python3", f"{CODE_MOUNT}/{SERVER_FILE}", "--root", ROOT, "--port", str(PORT)],
        "env": [{"name": "PYTHONDONTWRITEBYTECODE", "value": "1"}],
        "ports": [{"name": "http", "containerPort": PORT, "protocol": "TCP"}],
        "readinessProbe": {"tcpSocket": {"port": PORT}, "periodSeconds": 10},
        "resources": {kind: dict(amounts) for kind, amounts in RESOURCES.items()},
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "readOnlyRootFilesystem": True,
        },
        "volumeMounts": [
            {"name": CLAIM_VOLUME, "mountPath": ROOT, **read_only},
            {"name": CODE_VOLUME, "mountPath": CODE_MOUNT, **read_only},
        ],
    }
    placement = {"nodeSelector": dict(sorted(node_selector.items()))} if node_selector else {}
    return {
        **placement,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": uid,
            "runAsGroup": gid,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
        "volumes": [
            {"name": CLAIM_VOLUME, "persistentVolumeClaim": {"claimName": claim, **read_only}},
            {"name": CODE_VOLUME, "configMap": {"name": NAME}},
        ],
    }


def files_objects(
    config: FilesConfig, team: TeamConfig, claim: str, mirror: str | None, ids: tuple[int, int], after: tuple[str, ...]
) -> list[ManagedObject]:
    """ConfigMap (the server's code), Deployment and Service in the team namespace; `after`: the team claim."""
    ns = team.resolved_namespace
    labels = {TEAM_LABEL: team.name, **POD_LABELS}
    code = server_code()
    code_hash = hashlib.sha256(code.encode()).hexdigest()[:16]
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta.metadata(NAME, ns, labels),
        "data": {SERVER_FILE: code},
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta.metadata(NAME, ns, labels),
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "revisionHistoryLimit": HISTORY,
            "selector": {"matchLabels": dict(POD_LABELS)},
            "template": {
                # a new server rolls the pods (the ConfigMap's mount alone would change under the running one)
                "metadata": {"labels": dict(sorted(labels.items())), "annotations": {CODE_ANNOTATION: code_hash}},
                "spec": _pod_spec(claim, mirror, *ids, config.node_selector),
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta.metadata(NAME, ns, labels),
        # one unnamed port: the proxy path names the Service alone, the one resource name members may `get`
        "spec": {
            "type": "ClusterIP",
            "selector": dict(POD_LABELS),
            "ports": [{"port": PORT, "targetPort": PORT, "protocol": "TCP"}],
        },
    }
    # the provider replaces a ConfigMap whose data changed; its fixed name allows a delete-first replacement only
    cm = ManagedObject(config_map, after=after, delete_before_replace=True)
    return [cm, ManagedObject(deployment, after=(*after, cm.key)), ManagedObject(service, after=after)]
