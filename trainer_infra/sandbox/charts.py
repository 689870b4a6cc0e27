"""The charts' RBAC and controller identities, rendered from the pinned chart archives with the render's values.

The control plane (`trainer-infra simulate`, the e2e fleet) runs the controllers as processes, not as the charts'
Deployments; so that they still run with exactly the permissions a cluster gives them, it installs what the
charts render for RBAC (ServiceAccounts, ClusterRoles, ClusterRoleBindings, Roles, RoleBindings) and gives each
controller a client certificate for its Deployment's ServiceAccount, nothing more. A permission the charts lack
then fails here as it would on a cluster. The charts are rendered by ``chart-render`` (go/
chartrender): `helm template` with the Helm library the Kubernetes provider renders `helm.v4.Chart` with.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trainer_infra.components.identity import chart_name
from trainer_infra.sandbox.versions import BuildError

Obj = dict[str, Any]

RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
NAMESPACED_KINDS = ("ServiceAccount", "Role", "RoleBinding", "Deployment")
#: the last path segment of a controller container's image → the control plane's process for it
CONTROLLER_IMAGES = {"jobset": "jobset", "kueue": "kueue", "trainer-controller-manager": "trainer", "lws": "lws"}
#: charts whose controllers the control plane runs (the CSI driver's, for one, it does not)
CHARTS = ("jobset", "kueue", "kubeflow-trainer")


class ChartError(BuildError):
    """A chart archive is missing or does not render (an input of the control plane, like its binaries); the
    message names the release and what to do."""


@dataclass(frozen=True)
class ChartIdentities:
    """What the charts give the controllers: the RBAC objects to install, and each controller's username."""

    rbac: list[Obj]
    #: process (jobset, kueue, trainer, lws) → ``system:serviceaccount:<namespace>:<name>``
    users: dict[str, str]


def chart_archive(release: Obj, shared: Path) -> Path:
    """The archive of a release's chart at its version in the shared folder (``charts/<name>-<version>.tgz``)."""
    name, version = chart_name(str(release["chart"])), str(release.get("version", "")).removeprefix("v")
    path = shared / "charts" / f"{name}-{version}.tgz"
    if not path.exists():
        raise ChartError(
            f"Helm release {release['name']!r}: no chart archive {path} (the control plane installs the charts' RBAC "
            "from the pinned archives; set TRAINER_PLATFORM_SHARED to the shared folder, or pin the stack's "
            "components to the versions it has)"
        )
    return path


def render_release(binary: Path, archive: Path, release: Obj, kube_version: str) -> list[Obj]:
    """What `helm template` renders for a release; namespaced objects without a namespace get the release's,
    as Helm and the provider give them."""
    proc = subprocess.run(
        [str(binary), str(archive), str(release["name"]), str(release["namespace"]), f"v{kube_version}"],
        input=json.dumps(release.get("values") or {}),
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        raise ChartError(f"rendering Helm release {release['name']!r} ({archive.name}) failed: {proc.stderr[-2000:]}")
    objects = [doc for doc in yaml.safe_load_all(proc.stdout) if isinstance(doc, dict) and doc.get("kind")]
    for obj in objects:
        if obj["kind"] in NAMESPACED_KINDS:
            obj["metadata"].setdefault("namespace", release["namespace"])
    return objects


def controller_users(objects: Sequence[Obj]) -> dict[str, str]:
    """Process → the ServiceAccount username of the Deployment that runs its image."""
    users: dict[str, str] = {}
    for obj in objects:
        if obj["kind"] != "Deployment":
            continue
        pod = obj["spec"]["template"]["spec"]
        for container in pod.get("containers", []):
            image = str(container.get("image", "")).split("@")[0].rsplit(":", 1)[0]
            process = CONTROLLER_IMAGES.get(image.rsplit("/", 1)[-1])
            if process is not None:
                account = pod.get("serviceAccountName") or "default"
                users[process] = f"system:serviceaccount:{obj['metadata']['namespace']}:{account}"
    return users


def chart_identities(releases: Sequence[Obj], binary: Path, shared: Path, kube_version: str) -> ChartIdentities:
    """Render the releases of the controllers' charts (in parallel: Kueue's takes seconds) and keep their RBAC
    and identities."""
    ours = [r for r in releases if chart_name(str(r.get("chart", ""))) in CHARTS]
    archives = [chart_archive(r, shared) for r in ours]
    with ThreadPoolExecutor(max_workers=len(ours) or 1) as pool:
        rendered = list(pool.map(lambda r, a: render_release(binary, a, r, kube_version), ours, archives))
    objects = [obj for objs in rendered for obj in objs]
    return ChartIdentities([o for o in objects if o["kind"] in RBAC_KINDS], controller_users(objects))
