"""Destroy order: what a controller serves goes before the controller.

Depending on a chart component orders creation only; the engine deletes a component's children and the
component's dependents in no set order. Seen with the real engine (tests/e2e/test_pulumi.py): a destroy
deleted the Trainer controller while a ClusterTrainingRuntime waited on the finalizer only it removes.
The engine orders deletes by the dependencies each registration records, so those are what is checked here.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import struct_pb2
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.proto import resource_pb2

from tests.helpers import plan_of, stack_raw
from trainer_infra.program import deploy
from trainer_infra.render.capture import _CapturingMonitor, gc_paused, run_under_mocks

CHART = "kubernetes:helm.sh/v4:Chart"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"


class _ChartWithObjects(_CapturingMonitor):
    """Answers every chart with one controller Deployment among its `resources`, as the provider does."""

    def __init__(self) -> None:
        super().__init__()
        self.controllers: dict[str, str] = {}  # chart name → its Deployment's URN

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        response = super().RegisterResource(request)
        if request.type != CHART:
            return response
        urn = self.make_urn(response.urn, DEPLOYMENT, f"{request.name}:ns/controller")
        self.controllers[request.name] = urn
        self.resources[urn] = MockMonitor.ResourceRegistration(urn, "ns/controller", {})
        ref = struct_pb2.Struct()
        ref.update({rpc._special_sig_key: rpc._special_resource_sig, "urn": urn, "id": "ns/controller"})
        outputs = struct_pb2.Struct()
        outputs.update({"resources": [ref]})
        return resource_pb2.RegisterResourceResponse(urn=response.urn, id=response.id, object=outputs)


def test_what_a_controller_serves_is_deleted_before_the_chart_objects() -> None:
    plan = plan_of(stack_raw("local"))
    monitor = _ChartWithObjects()

    def program() -> None:
        deploy(plan)

    with gc_paused():
        run_under_mocks(program, "test", monitor)
    controller = monitor.controllers
    assert controller, "the local stack installs charts"
    gates = [r for r in monitor.records if r.type == "pulumi-python:dynamic:Resource"]
    assert gates
    for gate in gates:
        release = gate.inputs["release"]
        assert controller[release] in gate.dependencies, (gate.name, gate.dependencies)
    runtimes = [r for r in monitor.records if r.inputs.get("kind") == "ClusterTrainingRuntime"]
    trainer_gate = next(g.urn for g in gates if g.inputs["component"] == "trainer")
    assert runtimes and all(trainer_gate in r.dependencies for r in runtimes)
