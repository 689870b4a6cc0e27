"""The charts' post-renderer (platform/crd_order.py), run as the provider runs it: `python3 -c <script>` on Helm's
output. The CRDs are the charts' own files (crds/ of the chart and its subcharts: Helm prints them verbatim);
the workloads are written in the layouts the charts' templates render (JobSet's values annotations, Kueue's
quoted namespace, LWS's blank line before `spec`). The real charts through the real provider: test_pulumi.py."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from typing import Any

import pytest
import yaml

from trainer_infra.platform.crd_order import ANNOTATION
from trainer_infra.platform.helm import CRD_ORDER_ARGS
from trainer_infra.sandbox.versions import shared_dir

#: chart archive → its crds/ files (the chart's and its subcharts')
CHARTS = {
    "jobset-0.12.0.tgz": ["jobset/crds/"],
    "kubeflow-trainer-2.2.1.tgz": ["kubeflow-trainer/crds/", "charts/jobset/crds/", "charts/lws/crds/"],
    "kubeflow-trainer-2.3.0.tgz": ["charts/jobset/crds/", "charts/lws/crds/"],
}

JOBSET = """\
# Source: jobset/templates/controller/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: jobset-controller
  namespace: jobset-system
  labels:
    app.kubernetes.io/name: jobset
  annotations:
    example.com/from-values: "yes"
spec:
  replicas: 1
"""
KUEUE = """\
# Source: kueue/templates/manager/manager.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: kueue-controller-manager
  namespace: 'kueue-system'
  labels:
    app.kubernetes.io/name: kueue
spec:
  template:
    metadata:
      annotations:
        kubectl.kubernetes.io/default-container: manager
"""
LWS = """\
# Source: kubeflow-trainer/charts/lws/templates/manager/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: trainer-lws-controller-manager
  namespace: kubeflow-system
  labels:
    control-plane: controller-manager

spec:
  replicas: 1
"""
SERVICE = """\
apiVersion: v1
kind: Service
metadata:
  name: kueue-webhook-service
"""


def _crd_files(archive: str, folders: list[str]) -> list[str]:
    path = shared_dir() / "charts" / archive
    if not path.exists():
        pytest.skip(f"{path} not present (TRAINER_PLATFORM_SHARED)")
    with tarfile.open(path) as tar:
        members = sorted(
            (m for m in tar.getmembers() if m.isfile() and any(f in m.name for f in folders)), key=lambda m: m.name
        )
        assert members, (archive, folders)
        return [f"---\n# Source: {m.name}\n{tar.extractfile(m).read().decode()}\n" for m in members]  # type: ignore[union-attr]


def _post_render(manifest: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *CRD_ORDER_ARGS], input=manifest, capture_output=True, text=True, check=False
    )


def _docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.load_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) if d]


@pytest.mark.parametrize("archive", sorted(CHARTS))
def test_every_workload_depends_on_every_crd_of_its_chart(archive: str) -> None:
    crds = _crd_files(archive, CHARTS[archive])
    manifest = "".join(crds) + "".join(f"---\n{doc}" for doc in (JOBSET, KUEUE, LWS, SERVICE))
    done = _post_render(manifest)
    assert done.returncode == 0, done.stderr
    docs = _docs(done.stdout)
    names = {d["metadata"]["name"] for d in docs if d["kind"] == "CustomResourceDefinition"}
    assert len(names) == len([d for d in _docs(manifest) if d["kind"] == "CustomResourceDefinition"]) >= 1
    workloads = [d for d in docs if d["kind"] == "Deployment"]
    assert len(workloads) == 3
    for workload in workloads:
        listed = workload["metadata"]["annotations"][ANNOTATION].split(",")
        assert sorted(listed) == sorted(f"apiextensions.k8s.io/CustomResourceDefinition/{n}" for n in names)
    # nothing else changed: the rest of every document is as Helm printed it
    before, after = _docs(manifest), docs
    for old, new in zip(before, after, strict=True):
        if new["kind"] == "Deployment":
            new["metadata"]["annotations"].pop(ANNOTATION)
            if not new["metadata"]["annotations"]:
                del new["metadata"]["annotations"]
        assert new == old


def test_a_chart_without_crds_is_left_byte_for_byte() -> None:
    manifest = f"---\n{KUEUE}---\n{SERVICE}"
    done = _post_render(manifest)
    assert (done.returncode, done.stdout) == (0, manifest)


def test_a_layout_it_cannot_edit_fails_the_render_naming_the_object() -> None:
    """Never a silent install without the order: Helm reports the post-renderer's error and the preview fails."""
    crd = "---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: a.b.c\n"
    flow = JOBSET.replace('  annotations:\n    example.com/from-values: "yes"\n', "  annotations: {a: b}\n")
    done = _post_render(crd + "---\n" + flow)
    assert done.returncode == 1
    assert "cannot order Deployment jobset-controller after the chart's CRDs: flow-style annotations" in done.stderr
