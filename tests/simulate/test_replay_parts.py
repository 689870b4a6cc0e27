"""The parts of a replay that need no cluster: the TrainJob a row becomes, the kwok stage that ends its pods
after the row's duration, the baselines the bench compares with, and the ClusterQueue ceilings."""

from __future__ import annotations

from typing import Any, cast

import pytest

from tests.helpers import render, stack_raw
from trainer_infra.manifests.runtime import JOBSET_NAME_LABEL
from trainer_infra.sandbox.kube import ApiError, KubeClient
from trainer_infra.sandbox.kwok_stages import DURATION_ANNOTATION, kwok_duration_stage
from trainer_infra.sandbox.versions import BINARIES, BuildError, VersionSet, check_binaries
from trainer_infra.simulate.baselines import FLAT, PARTITIONS, flat_fifo, static_partitions
from trainer_infra.simulate.facts import StackFacts, stack_facts
from trainer_infra.simulate.replay import Replay, duration_patch, trainjob
from trainer_infra.simulate.trace import TraceRow


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return render(stack_raw("local"), "local").manifests


@pytest.fixture(scope="module")
def local(objects: list[dict[str, Any]]) -> StackFacts:
    return stack_facts(objects)


def test_a_row_becomes_a_trainjob_of_its_team_with_its_compressed_duration(local: StackFacts) -> None:
    row = TraceRow(submit=0, team="vision", nodes=4, accelerators=8, duration=1800, priority="high", name="a")
    job = trainjob(row, local, compression=60)
    assert job["metadata"]["namespace"] == "vision"
    assert job["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "vision", "kueue.x-k8s.io/priority-class": "high"}
    assert job["spec"]["trainer"]["numNodes"] == 4
    assert job["spec"]["trainer"]["resourcesPerNode"]["requests"] == {"nvidia.com/gpu": "8"}
    (patch,) = job["spec"]["runtimePatches"]
    (replicated,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert replicated["name"] == "node"
    assert replicated["template"]["spec"]["template"]["metadata"]["annotations"] == {DURATION_ANNOTATION: "30.000s"}
    mpi = trainjob(row.model_copy(update={"runtime": "deepspeed-distributed"}), local, 60)
    names = [
        j["name"] for j in mpi["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    ]
    assert names == ["launcher", "node"]


def test_kwok_ends_only_annotated_running_pods_after_their_duration() -> None:
    stage = kwok_duration_stage()
    keys = {e["key"]: e for e in stage["spec"]["selector"]["matchExpressions"]}
    assert keys['.metadata.annotations["simulate.trainer-platform.io/duration"]']["operator"] == "Exists"
    assert keys[".status.phase"]["values"] == ["Running"]
    assert stage["spec"]["delay"]["durationFrom"] == {
        "expressionFrom": '.metadata.annotations["simulate.trainer-platform.io/duration"]'
    }
    assert "phase: Succeeded" in stage["spec"]["next"]["statusTemplate"]


def test_cluster_queue_ceilings_follow_borrowing_and_lending(local: StackFacts) -> None:
    # nlp: 128 nominal + vision lends at most 64; vision: 128 + nlp lends all 128
    assert local.limits == {"nlp": (128, 192), "vision": (128, 256)}
    assert local.capacity == 256 and local.weights() == {"nlp": 2.0, "vision": 1.0}


def test_the_flat_baseline_is_one_queue_with_the_whole_capacity(objects: list[dict[str, Any]]) -> None:
    flat = stack_facts(flat_fifo(objects))
    assert set(flat.quotas) == {FLAT} and flat.limits == {FLAT: (256, 256)}
    assert {t.cluster_queue for t in flat.teams.values()} == {FLAT}
    assert not [o for o in flat_fifo(objects) if o["kind"] == "Cohort"]


def test_static_partitions_keep_each_quota_and_never_borrow(objects: list[dict[str, Any]]) -> None:
    rewritten = static_partitions(objects)
    parts = stack_facts(rewritten)
    assert parts.limits == {"nlp": (128, 128), "vision": (128, 128)}
    # one cohort, only so that Kueue retries a team's pending TAS job when another team's job frees nodes
    assert set(parts.cohorts.values()) == {PARTITIONS}
    assert [o["metadata"]["name"] for o in rewritten if o["kind"] == "Cohort"] == [PARTITIONS]
    quotas = [q for flavors in parts.quotas.values() for q in flavors.values()]
    assert quotas and all(q.borrowing_limit == 0 and q.lending_limit == 0 for q in quotas)
    queues = [o["spec"] for o in rewritten if o["kind"] == "ClusterQueue"]
    assert all("fairSharing" not in q and q["preemption"]["reclaimWithinCohort"] == "Never" for q in queues)


def test_missing_binaries_say_how_to_build_them(tmp_path: Any) -> None:
    with pytest.raises(BuildError, match=r"`trainer-infra sandbox build` builds them") as err:
        check_binaries(VersionSet(), tmp_path)
    assert all(name in str(err.value) for name in BINARIES)
    assert "needs Go 1.26 or newer" in str(err.value) and "no root" in str(err.value)


def test_missing_binaries_without_go_say_where_to_get_it(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no `go` here
    with pytest.raises(
        BuildError, match=r"First: `go` is not on PATH: install Go 1.26 or newer \(https://go.dev/dl/\)"
    ):
        check_binaries(VersionSet(), tmp_path)


def test_a_build_without_go_stops_before_the_first_target(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from trainer_infra.sandbox.build import Builder

    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BuildError, match=r"cannot build etcd .*`go` is not on PATH"):
        Builder(VersionSet(), root=tmp_path).build(only={"etcd"})
    assert not (tmp_path / VersionSet().key / "bin" / "etcd").exists()


def test_the_sandbox_writes_the_kueue_api_version_of_the_release_it_runs() -> None:
    from trainer_infra.versions import MATRIX

    for release in MATRIX.components["kueue"].releases:
        expected = f"kueue.x-k8s.io/{release.api_versions['kueue.x-k8s.io']}"
        assert VersionSet(kueue=release.version).api_version("kueue.x-k8s.io") == expected


def test_the_package_runs_the_binaries_the_build_makes() -> None:
    from trainer_infra.sandbox.build import Builder

    assert tuple(t.name for t in Builder(VersionSet()).targets() if not (t.tool or t.node or t.opt_in)) == BINARIES


class Patches:
    """The replay's client, as far as resuming a job goes: refuses the first patch as Trainer does while the
    JobSet still has active pods, then takes them."""

    def __init__(self) -> None:
        self.applied: list[dict[str, Any]] = []
        self.refusals = 1

    def apply(self, obj: dict[str, Any], *, field_manager: str) -> dict[str, Any]:
        if self.refusals:
            self.refusals -= 1
            raise ApiError(
                422, "RuntimePatches cannot be modified when the JobSet's ReplicatedJob node is still active"
            )
        self.applied.append(obj)
        return obj


def test_a_preempted_job_runs_again_only_what_is_left_after_its_last_checkpoint(local: StackFacts) -> None:
    # 2 nodes, 3,600 s of work, a checkpoint every 900 s, replayed at 60×: preempted after its pods ran 2,000 s,
    # it keeps its checkpoint at 1,800 and its pods run the 1,800 s left (30 wall s) when admitted again
    row = TraceRow(submit=0, team="vision", nodes=2, accelerators=8, duration=3600, name="long", checkpoint=900)
    client = Patches()
    replay = Replay(cast(KubeClient, client), local, [row], compression=60, bound=10, checkpoint=0)
    clock = iter([0.0, 100.0, 2100.0, 2200.0, 2300.0, 4100.0])
    replay.now = lambda: next(clock)  # type: ignore[method-assign]
    owner = {"ownerReferences": [{"kind": "TrainJob", "name": "long"}], "namespace": "vision"}

    def workload(**conditions: str) -> dict[str, Any]:
        return {
            "metadata": owner,
            "status": {
                "conditions": [{"type": k, "status": v, "reason": "InClusterQueue"} for k, v in conditions.items()]
            },
        }

    pod = {"metadata": {"namespace": "vision", "uid": "p1", "labels": {JOBSET_NAME_LABEL: "long"}}, "status": {}}
    replay._on_workload("ADDED", workload(Admitted="True"))  # t 0
    replay._on_pod("MODIFIED", {**pod, "status": {"phase": "Running"}})  # t 100
    replay._on_workload("MODIFIED", workload(Admitted="False", Evicted="True", Preempted="True"))  # t 2,100
    replay._resume()  # refused: the JobSet's pods are still going
    assert replay.to_resume == {"vision/long": 1800} and client.applied == []
    replay._resume()
    (patch,) = client.applied
    assert patch["metadata"] == {"name": "long", "namespace": "vision"}
    (entry,) = patch["spec"]["runtimePatches"]
    assert entry == duration_patch(row, local, 30.0)
    (replicated,) = entry["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert replicated["template"]["spec"]["template"]["metadata"]["annotations"] == {DURATION_ANNOTATION: "30.000s"}
    replay._on_workload("MODIFIED", workload(Admitted="True"))  # t 2,200
    replay._on_pod("MODIFIED", {**pod, "metadata": {**pod["metadata"], "uid": "p2"}, "status": {"phase": "Running"}})
    replay._on_workload("MODIFIED", workload(Finished="True"))  # t 4,100
    job = replay.jobs["vision/long"]
    first, second = job.admissions
    assert (first.running, first.end, first.ended_by) == (100, 2100, "evicted")
    assert (second.start, second.running, second.resumed_from, second.end) == (2200, 2300, 1800, 4100)
    # it ran 2,000 + 1,800 s of work, lost the 200 since its checkpoint, and held quota 100 s before each run
    assert [(s.work, s.lost, s.lag) for s in job.stretches(4100)] == [(2000, 200, 100), (1800, 0, 100)]
