"""`migrate --from-cluster`: only list calls, per namespace and kind counts with reasons, `--out` writes
the jobs that convert."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client.exceptions import ApiException

from tests.migrate.helpers import job, local_target
from trainer_infra.migrate import command

PT = ("kubeflow.org/v1", "PyTorchJob")


class FakeCluster:
    """Answers only the two list calls of CustomObjectsApi: anything else would raise AttributeError."""

    def __init__(self, objects: list[dict[str, Any]], served: set[str]) -> None:
        self.objects, self.served = objects, served
        self.calls: list[Any] = []

    def _items(self, group: str, version: str, plural: str, namespace: str | None) -> dict[str, Any]:
        self.calls.append((version, plural, namespace))
        if f"{version}/{plural}" not in self.served:
            raise ApiException(status=404, reason="Not Found")
        items = [
            o
            for o in self.objects
            if o["apiVersion"] == f"{group}/{version}"
            and o["kind"].lower() + "s" == plural
            and namespace in (None, o["metadata"]["namespace"])
        ]
        return {"items": [{k: v for k, v in o.items() if k not in ("apiVersion", "kind")} for o in items]}

    def list_cluster_custom_object(self, group: str, version: str, plural: str) -> dict[str, Any]:
        return self._items(group, version, plural, None)

    def list_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str) -> dict[str, Any]:
        return self._items(group, version, plural, namespace)


def cluster() -> FakeCluster:
    lossy = job(*PT, name="lossy")
    lossy["spec"]["runPolicy"] = {"backoffLimit": 3}
    refused = job(*PT, name="refused")
    refused["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["hostNetwork"] = True
    legacy = job(*PT, name="legacy")
    legacy["metadata"]["namespace"] = "ml-legacy"
    objects = [
        job(*PT, name="clean"),
        lossy,
        refused,
        legacy,
        job("kubeflow.org/v1", "JAXJob", name="jax"),
        job("kubeflow.org/v1", "TFJob", name="tf"),
    ]
    for i, o in enumerate(objects):
        o["metadata"]["uid"] = f"uid-{i}"
        o["status"] = {"conditions": [{"type": "Running", "status": "True"}]}
    return FakeCluster(objects, {"v1/pytorchjobs", "v1/jaxjobs", "v1/tfjobs"})


def call(argv: list[str], api: FakeCluster, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    p = argparse.ArgumentParser()
    command.add_arguments(p)
    code = command.run(p.parse_args(argv), lambda _: local_target(), lambda _: api)
    out, err = capsys.readouterr()
    return code, out, err


def test_inventory_counts_per_namespace_and_kind(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    api = cluster()
    code, out, err = call(["--from-cluster", "--out", str(tmp_path / "out")], api, capsys)
    assert code == 1  # not every job converts
    rows = {tuple(line.split()[:3]): line.split()[3:] for line in out.splitlines() if not line.startswith(" ")}
    # clean, lossy allowed, needs --allow-lossy, refused, cannot
    assert rows[("nlp", "kubeflow.org/v1", "PyTorchJob")] == ["1", "0", "1", "1", "0"]
    assert rows[("nlp", "kubeflow.org/v1", "JAXJob")] == ["1", "0", "0", "0", "0"]
    assert rows[("nlp", "kubeflow.org/v1", "TFJob")] == ["0", "0", "0", "0", "1"]
    assert "1 × needs --allow-lossy: restarts are the runtime's JobSet failurePolicy" in out
    assert 'refused: pods "refused-master-0" is forbidden: violates PodSecurity "baseline:v1.34": host ' in out
    assert "not a team namespace of stack local" in out and "no runtime for framework tensorflow" in out
    assert "note: cluster:kubeflow.org/v1/mpijobs: not served by this cluster" in err
    written = sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*.yaml"))
    assert written == ["nlp/clean.yaml", "nlp/jax.yaml"]
    assert yaml.safe_load((tmp_path / "out" / "nlp" / "jax.yaml").read_text())["kind"] == "TrainJob"


def test_inventory_reads_only_the_given_namespaces(capsys: pytest.CaptureFixture[str]) -> None:
    api = cluster()
    code, out, _ = call(["--from-cluster", "-n", "ml-legacy", "--namespace-map", "ml-legacy=vision"], api, capsys)
    assert {ns for _, _, ns in api.calls} == {"ml-legacy"}
    assert code == 0 and "vision" in out


def test_an_object_served_at_two_versions_is_counted_once(capsys: pytest.CaptureFixture[str]) -> None:
    mpi = job("kubeflow.org/v2beta1", "MPIJob", name="mpi")
    mpi["metadata"]["uid"] = "same"
    as_v1 = dict(mpi, apiVersion="kubeflow.org/v1")
    api = FakeCluster([mpi, as_v1], {"v2beta1/mpijobs", "v1/mpijobs"})
    code, out, _ = call(["--from-cluster"], api, capsys)
    assert code == 0
    assert "kubeflow.org/v2beta1" in out and "kubeflow.org/v1 MPIJob" not in out


def test_a_refused_list_call_stops_the_inventory(capsys: pytest.CaptureFixture[str]) -> None:
    class Forbidden(FakeCluster):
        def _items(self, group: str, version: str, plural: str, namespace: str | None) -> dict[str, Any]:
            raise ApiException(status=403, reason="Forbidden")

    code, out, err = call(["--from-cluster", "-n", "nlp"], Forbidden([], set()), capsys)
    assert code == 2 and out == ""
    assert "403 Forbidden (the kubeconfig's user needs list on it)" in err


def test_an_unreachable_cluster_is_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "c",
                "clusters": [
                    {"name": "c", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}}
                ],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            }
        )
    )
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    p = argparse.ArgumentParser()
    command.add_arguments(p)
    code = command.run(p.parse_args(["--from-cluster"]), lambda _: local_target(), command.cluster_api)
    err = capsys.readouterr().err
    assert code == 2 and "cannot read the cluster" in err and "Traceback" not in err
    assert (
        command.run(
            p.parse_args(["--from-cluster", "--context", "nope"]), lambda _: local_target(), command.cluster_api
        )
        == 2
    )
