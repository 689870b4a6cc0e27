"""`trainer-infra storage-versions`: objects rewritten first, `status.storedVersions` cleared only after all were
(the e2e runs it on a real API server: tests/e2e/test_pulumi_upgrade.py)."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from trainer_infra.versions.crd_storage_versions import (
    RETRIES,
    ConflictError,
    GoneError,
    cmd_storage_versions,
    component_groups,
    migrate,
    stale_crds,
)

Obj = dict[str, Any]


def _crd(plural: str, group: str, stored: list[str], storage: str = "v1beta2") -> Obj:
    versions = [
        {"name": "v1beta1", "storage": storage == "v1beta1"},
        {"name": "v1beta2", "storage": storage == "v1beta2"},
    ]
    return {
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "names": {"plural": plural}, "versions": versions},
        "status": {"storedVersions": stored},
    }


class FakeCluster:
    """CRDs and their objects; ``conflicts``: object name → how many writes of it fail with a conflict."""

    def __init__(self, crds: list[Obj], objects: dict[str, list[str]], conflicts: dict[str, int] | None = None) -> None:
        self._crds = crds
        self._objects = objects
        self.conflicts = dict(conflicts or {})
        self.gone: set[str] = set()
        self.log: list[str] = []

    def crds(self) -> list[Obj]:
        return self._crds

    def objects(self, group: str, version: str, plural: str) -> list[Obj]:
        return [{"metadata": {"name": n, "namespace": "nlp", "resourceVersion": "1"}} for n in self._objects[plural]]

    def read(self, group: str, version: str, plural: str, namespace: str | None, name: str) -> Obj:
        if name in self.gone:
            raise GoneError(name)
        self.log.append(f"read {plural}/{name}")
        return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": "2"}}

    def replace(self, group: str, version: str, plural: str, obj: Obj) -> None:
        name = obj["metadata"]["name"]
        if self.conflicts.get(name, 0) > 0:
            self.conflicts[name] -= 1
            raise ConflictError(name)
        if name in self.gone:
            raise GoneError(name)
        self.log.append(f"write {plural}/{name}@{version} rv{obj['metadata']['resourceVersion']}")

    def set_stored_versions(self, crd: str, versions: list[str]) -> None:
        self.log.append(f"status {crd} {versions}")
        next(c for c in self._crds if c["metadata"]["name"] == crd)["status"]["storedVersions"] = versions


def test_only_crds_of_the_components_listing_an_old_version_are_stale() -> None:
    assert component_groups() == ("jobset.x-k8s.io", "kueue.x-k8s.io", "trainer.kubeflow.org")
    crds = [
        _crd("workloads", "kueue.x-k8s.io", ["v1beta1", "v1beta2"]),
        _crd("cohorts", "kueue.x-k8s.io", ["v1beta2"]),
        _crd("widgets", "example.com", ["v1beta1", "v1beta2"]),
    ]
    (stale,) = stale_crds(crds, component_groups())
    assert (stale.name, stale.storage, stale.stored) == ("workloads.kueue.x-k8s.io", "v1beta2", ("v1beta1", "v1beta2"))


def test_migrate_rewrites_every_object_then_clears_stored_versions() -> None:
    crds = [_crd("workloads", "kueue.x-k8s.io", ["v1beta1", "v1beta2"]), _crd("cohorts", "kueue.x-k8s.io", ["v1beta2"])]
    cluster = FakeCluster(crds, {"workloads": ["a", "b", "c"], "cohorts": ["x"]}, conflicts={"b": 1})
    cluster.gone = {"c"}  # deleted after the list: nothing to migrate
    said: list[str] = []
    migrate(cluster, component_groups(), said.append)
    assert cluster.log == [
        "write workloads/a@v1beta2 rv1",
        "read workloads/b",  # changed meanwhile: read again, written as it is now
        "write workloads/b@v1beta2 rv2",
        "status workloads.kueue.x-k8s.io ['v1beta2']",
    ]
    assert said == [
        "workloads.kueue.x-k8s.io: 2 objects rewritten at v1beta2; storedVersions ['v1beta1', 'v1beta2'] → ['v1beta2']"
    ]
    assert stale_crds(cluster.crds(), component_groups()) == []


def _args(**kw: Any) -> argparse.Namespace:
    return argparse.Namespace(**{"kubeconfig": None, "context": None, "migrate": False, **kw})


def test_the_command_reports_migrates_and_never_clears_status_after_a_failed_write(
    capsys: pytest.CaptureFixture[str],
) -> None:
    crds = [_crd("clusterqueues", "kueue.x-k8s.io", ["v1beta1", "v1beta2"])]
    cluster = FakeCluster(crds, {"clusterqueues": ["nlp"]}, conflicts={"nlp": RETRIES})
    assert cmd_storage_versions(_args(), lambda *_: cluster) == 1
    assert "clusterqueues.kueue.x-k8s.io: storedVersions ['v1beta1', 'v1beta2']" in capsys.readouterr().out
    # an object that keeps changing: exit 2, the status untouched (its old version may still be in etcd)
    assert cmd_storage_versions(_args(migrate=True), lambda *_: cluster) == 2
    assert "run it again" in capsys.readouterr().err
    assert not [line for line in cluster.log if line.startswith("status")]
    cluster.conflicts.clear()
    assert cmd_storage_versions(_args(migrate=True), lambda *_: cluster) == 0
    assert "lists only its storage version" in capsys.readouterr().out
    assert cluster.log[-2:] == [
        "write clusterqueues/nlp@v1beta2 rv1",
        "status clusterqueues.kueue.x-k8s.io ['v1beta2']",
    ]
