"""Replacing an object that keeps its name: the provider asks for delete-first, the program must not forbid it.

The engine takes an explicit ``deleteBeforeReplace`` option over the provider's answer (pulumi step_generator:
``if goal.DeleteBeforeReplace != nil``), and the Python SDK sends it as explicit whenever the option is not None.
An explicit False on a named object makes a replacement create first, which fails "already exists" (seen with
the dashboards' ConfigMaps in the e2e's `up` adding a team).
"""

from __future__ import annotations

from typing import Any

from tests.helpers import plan_of, stack_raw
from trainer_infra.program import deploy
from trainer_infra.render.capture import _CapturingMonitor, gc_paused, run_under_mocks


class _Options(_CapturingMonitor):
    """Keeps the delete-before-replace option as the engine receives it: (defined, value) per object."""

    def __init__(self) -> None:
        super().__init__()
        self.dbr: dict[str, tuple[bool, bool]] = {}

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        if request.object and "kind" in request.object:
            kind, name = request.object["kind"], request.name
            self.dbr[f"{kind}/{name}"] = (request.deleteBeforeReplaceDefined, request.deleteBeforeReplace)
        return super().RegisterResource(request)


def test_no_object_forbids_the_providers_delete_first_replacement() -> None:
    plan = plan_of(stack_raw("local"))
    monitor = _Options()

    def program() -> None:
        deploy(plan)

    with gc_paused():
        run_under_mocks(program, "test", monitor)
    assert len(monitor.dbr) > 50, len(monitor.dbr)
    forced_create_first = sorted(key for key, (defined, value) in monitor.dbr.items() if defined and not value)
    assert not forced_create_first, forced_create_first[:10]
    # what the plan asks for explicitly still reaches the engine (kwok Nodes, Kueue's immutable flavors)
    assert any(defined and value for defined, value in monitor.dbr.values())
