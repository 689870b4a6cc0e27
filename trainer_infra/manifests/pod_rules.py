"""What a pod spec of a team may not contain, as data: one vocabulary for the admission policies (CEL), the
catalog loader and the CrossGuard rule (Python), so the three never disagree.

A team member is hostile input: an inline `nfs`/`csi`/`hostPath` volume reaches storage outside the team's
claim (every team claim is a subdirectory of one export), host namespaces and privileged containers reach
the node, a priority class like `system-node-critical` outranks the platform's controllers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: Volume kinds a team's pods may use: its claims and what lives inside the pod or the namespace.
SAFE_VOLUME_KINDS = ("persistentVolumeClaim", "emptyDir", "configMap", "secret", "projected", "downwardAPI")
#: Every other kind of the core Volume (as in the Trainer 2.2.1/2.3.0 and JobSet 0.11/0.12 CRD schemas).
#: A CEL `has()` on a field missing from a schema does not compile, so this list is checked against the
#: CRDs in the tests; a new kind in a future schema fails that test until it is listed here.
UNSAFE_VOLUME_KINDS = (
    "awsElasticBlockStore",
    "azureDisk",
    "azureFile",
    "cephfs",
    "cinder",
    "csi",
    "ephemeral",
    "fc",
    "flexVolume",
    "flocker",
    "gcePersistentDisk",
    "gitRepo",
    "glusterfs",
    "hostPath",
    "image",
    "iscsi",
    "nfs",
    "photonPersistentDisk",
    "portworxVolume",
    "quobyte",
    "rbd",
    "scaleIO",
    "storageos",
    "vsphereVolume",
)
HOST_NAMESPACES = ("hostNetwork", "hostPID", "hostIPC")
#: Claim template fields that bind to an existing volume (possibly another team's) instead of a new one.
CLAIM_BINDING_FIELDS = ("volumeName", "selector", "dataSource", "dataSourceRef")
DEFAULT_SERVICE_ACCOUNT = "default"


def _containers(spec: Mapping[str, Any]) -> Iterable[tuple[str, Mapping[str, Any]]]:
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(field) or []:
            yield f"{field}[{c.get('name', '?')}]", c


def pod_spec_problems(spec: Mapping[str, Any], priority_classes: Iterable[str] = ()) -> list[str]:
    """Plain-words problems of one pod spec (empty: acceptable in a team namespace)."""
    problems: list[str] = []
    for v in spec.get("volumes") or []:
        unsafe = [k for k in v if k in UNSAFE_VOLUME_KINDS]
        if unsafe:
            problems.append(
                f"volume {v.get('name', '?')!r} is of kind {unsafe[0]}: only claims and "
                f"{', '.join(SAFE_VOLUME_KINDS[1:])} volumes are allowed (other kinds reach storage or the node "
                "outside the team's space)"
            )
    for field in HOST_NAMESPACES:
        if spec.get(field) is True:
            problems.append(f"{field}: true shares the node's namespace with the pod")
    pc = spec.get("priorityClassName")
    allowed = sorted(set(priority_classes))
    if pc and pc not in allowed:
        problems.append(f"priorityClassName {pc!r} is not one of the platform's priority classes {allowed}")
    if spec.get("nodeName"):
        problems.append("nodeName binds pods to a node past the scheduler and the queue's placement")
    for where, c in _containers(spec):
        sc = c.get("securityContext") or {}
        if sc.get("privileged") is True:
            problems.append(f"{where}: privileged containers control the node")
        added = (sc.get("capabilities") or {}).get("add") or []
        if added:
            problems.append(f"{where}: adds capabilities {sorted(added)}")
        if (sc.get("windowsOptions") or {}).get("hostProcess") is True:
            problems.append(f"{where}: hostProcess containers run on the node")
        if any(p.get("hostPort") for p in c.get("ports") or []):
            problems.append(f"{where}: hostPort opens a port on the node")
    return problems
