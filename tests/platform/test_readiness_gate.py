"""The readiness gate lets custom resources through only once CRDs are Established and the webhook answers."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import pytest

from tests.helpers import MINIMAL, plan_of
from trainer_infra.core.objects import ReadinessGate
from trainer_infra.platform import gate


class _ApiError(Exception):
    def __init__(self, status: int, body: str) -> None:
        super().__init__(body)
        self.status, self.body = status, body


class _FakeCluster:
    """CRDs become Established after `crd_after` polls; the webhook answers after `webhook_after`."""

    def __init__(self, crd_after: int, webhook_after: int) -> None:
        self.polls = {"crd": 0, "webhook": 0}
        self.crd_after, self.webhook_after = crd_after, webhook_after
        self.dry_runs: list[str] = []
        self.ApiException = _ApiError

    def ApiextensionsV1Api(self, _api: Any) -> Any:  # noqa: N802 - mirrors the kubernetes client
        def read(name: str) -> Any:
            self.polls["crd"] += 1
            status = "True" if self.polls["crd"] > self.crd_after else "False"
            return SimpleNamespace(
                status=SimpleNamespace(conditions=[SimpleNamespace(type="Established", status=status)])
            )

        return SimpleNamespace(read_custom_resource_definition=read)

    def CustomObjectsApi(self, _api: Any) -> Any:  # noqa: N802
        def create(*args: Any, dry_run: str) -> None:
            assert dry_run == "All", "probes must never persist anything"
            self.polls["webhook"] += 1
            self.dry_runs.append(args[-2])
            if self.polls["webhook"] <= self.webhook_after:
                raise _ApiError(500, 'failed calling webhook "vclusterqueue.kb.io": connection refused')

        return SimpleNamespace(create_namespaced_custom_object=create, create_cluster_custom_object=create)


def _gate(component: str) -> ReadinessGate:
    """The gate the program plans for `component` in a default stack."""
    return next(g for g in plan_of(MINIMAL).gates if g.component == component)


def _inputs(component: str = "kueue", timeout: float = 5) -> dict[str, Any]:
    return {
        "component": component,
        "version": "0.19.2",
        "crds": list(_gate(component).crds[:1]),
        "probes": list(_gate(component).probes),
        "timeoutSeconds": timeout,
    }


def test_gate_waits_for_crds_then_webhook(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = _FakeCluster(crd_after=2, webhook_after=3)
    monkeypatch.setattr(gate, "_client", lambda *_: (cluster, None))
    monkeypatch.setattr(gate, "POLL_SECONDS", 0.0)
    gate.wait_ready(_inputs())
    assert cluster.polls["webhook"] == 4, "the gate kept probing until the webhook answered"
    assert cluster.dry_runs[-1] == "resourceflavors"


def test_gate_times_out_naming_what_did_not_happen(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = _FakeCluster(crd_after=0, webhook_after=10**9)
    monkeypatch.setattr(gate, "_client", lambda *_: (cluster, None))
    monkeypatch.setattr(gate, "POLL_SECONDS", 0.01)
    with pytest.raises(TimeoutError) as info:
        gate.wait_ready(_inputs(timeout=0.1))
    assert "kueue 0.19.2 not ready" in str(info.value)
    assert "failed calling webhook" in str(info.value)


@pytest.mark.cluster
@pytest.mark.skipif(not os.environ.get("KUBECONFIG"), reason="opt-in: needs KUBECONFIG of a cluster with the platform")
def test_gates_pass_on_a_real_cluster() -> None:
    """Run with `pytest -m cluster` after `pulumi up`: every gate passes against the live API server."""
    for planned in plan_of(MINIMAL).gates:
        gate.wait_ready(
            {
                "component": planned.component,
                "version": "live",
                "crds": list(planned.crds),
                "probes": list(planned.probes),
                "timeoutSeconds": 60,
            }
        )


def test_gate_provider_survives_serialization_into_a_fresh_process() -> None:
    """Pulumi pickles dynamic providers with dill and loads them in a separate provider host process."""
    import base64
    import subprocess
    import sys

    from pulumi.dynamic.dynamic import serialize_provider

    blob = serialize_provider(gate._GateProvider())
    code = (
        "import base64, sys, dill; p = dill.loads(base64.b64decode(sys.stdin.read()));"
        "print(type(p).__module__, type(p).__name__, callable(p.create))"
    )
    out = subprocess.run([sys.executable, "-c", code], input=blob, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["trainer_infra.platform.gate", "_GateProvider", "True"]
    assert base64.b64decode(blob)
