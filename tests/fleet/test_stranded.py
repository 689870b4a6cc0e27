"""`trainer-infra fleet redispatch` picks exactly the TrainJobs a lost worker stranded on the manager (the e2e runs it:
tests/e2e/test_fleet.py), and never one Kueue is still handling."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from trainer_infra.cli import main
from trainer_infra.fleet.stranded import MULTIKUEUE, find_stranded

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
EVICTED = 'Evicted due to AdmissionCheck in Retry state: "multikueue" (Admitting remote lost ...)'


def _cond(kind: str, status: str, minutes_ago: int = 10, message: str = "") -> dict[str, Any]:
    at = (NOW - timedelta(minutes=minutes_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"type": kind, "status": status, "lastTransitionTime": at, "message": message}


def _pair() -> tuple[dict[str, Any], dict[str, Any]]:
    """What the e2e saw on the manager after a worker's API server stopped and `workerLostTimeout` passed (Kueue
    0.19.2): evicted, still QuotaReserved and Admitted, the multikueue check Pending."""
    trainjob = {
        "metadata": {"name": "lost-1", "namespace": "nlp", "uid": "u-1"},
        "spec": {"managedBy": MULTIKUEUE, "suspend": True},
        "status": {"jobsStatus": [{"name": "node", "active": 1, "ready": 1, "succeeded": 0, "failed": 0}]},
    }
    workload = {
        "metadata": {
            "name": "trainjob-lost-1-abcde",
            "namespace": "nlp",
            "ownerReferences": [{"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "lost-1"}],
        },
        "status": {
            "conditions": [
                _cond("QuotaReserved", "True", 12),
                _cond("Admitted", "True", 12),  # as Kueue 0.19.2 leaves it while the eviction waits
                _cond("Evicted", "True", 10, EVICTED),
            ]
        },
    }
    return workload, trainjob


def test_a_job_evicted_from_a_lost_worker_is_stranded() -> None:
    workload, trainjob = _pair()
    (found,) = find_stranded([workload], [trainjob], NOW, timedelta(minutes=1))
    assert (found.namespace, found.trainjob, found.uid, found.workload) == (
        "nlp",
        "lost-1",
        "u-1",
        workload["metadata"]["name"],
    )
    assert found.reason == EVICTED


def _workload(edit: Any) -> Any:
    def apply(wl: dict[str, Any], _tj: dict[str, Any]) -> None:
        edit(wl)

    return apply


def _trainjob(edit: Any) -> Any:
    def apply(_wl: dict[str, Any], tj: dict[str, Any]) -> None:
        edit(tj)

    return apply


def _set_condition(kind: str, status: str, minutes_ago: int = 10) -> Any:
    def edit(wl: dict[str, Any]) -> None:
        conds = [c for c in wl["status"]["conditions"] if c["type"] != kind]
        wl["status"]["conditions"] = [*conds, _cond(kind, status, minutes_ago)]

    return edit


NOT_STRANDED = {
    "a single-cluster job (not MultiKueue's)": _trainjob(lambda tj: tj["spec"].pop("managedBy")),
    "Kueue already saw its jobs stop": _trainjob(lambda tj: tj["status"]["jobsStatus"][0].update(active=0)),
    "not suspended (it runs)": _trainjob(lambda tj: tj["spec"].update(suspend=False)),
    "dispatched again (the eviction completed)": _workload(_set_condition("Evicted", "False")),
    "quota released (requeued by Kueue)": _workload(_set_condition("QuotaReserved", "False")),
    "finished": _workload(_set_condition("Finished", "True")),
    "evicted just now (Kueue may still stop it)": _workload(_set_condition("Evicted", "True", 0)),
    "owned by something else": _workload(lambda wl: wl["metadata"]["ownerReferences"][0].update(kind="JobSet")),
}


@pytest.mark.parametrize("edit", NOT_STRANDED.values(), ids=NOT_STRANDED.keys())
def test_a_job_kueue_still_handles_is_left_alone(edit: Any) -> None:
    workload, trainjob = copy.deepcopy(_pair())
    edit(workload, trainjob)
    assert find_stranded([workload], [trainjob], NOW, timedelta(minutes=1)) == []


def test_the_command_says_where_it_could_not_connect(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "none.kubeconfig"
    code = main(["fleet", "redispatch", "--kubeconfig", str(missing), "--dry-run"])
    assert code == 2
    assert str(missing) in capsys.readouterr().err
