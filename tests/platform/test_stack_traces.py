"""The state keeps one frame per resource: where it was registered (docs/large-organisations.md, "Measured")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi
import pytest
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import resource as sdk

from trainer_infra.platform.stack_traces import trim_stack_traces
from trainer_infra.render.capture import EchoMocks, run_under_mocks


class _TraceMonitor(pulumi_mocks.MockMonitor):
    """Records the stack trace each RegisterResource request carries to the engine."""

    def __init__(self) -> None:
        super().__init__(EchoMocks())
        self.traces: dict[str, list[str]] = {}

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        self.traces[request.name] = [f"{f.pc.uri}#{f.pc.line}" for f in request.stackTrace.frames]
        return super().RegisterResource(request)  # type: ignore[no-untyped-call]


class _ConfigMap(pulumi.CustomResource):
    """A concrete resource class, as the provider SDK's are (the SDK's capture skips their constructors)."""

    def __init__(self, name: str) -> None:
        super().__init__("kubernetes:core/v1:ConfigMap", name, {"data": {}})


def _register_deep(depth: int) -> int:
    """A resource registered ``depth`` calls down, as the platform's components do; returns its line."""
    if depth:
        return _register_deep(depth - 1)
    _ConfigMap("deep")
    return _register_deep.__code__.co_firstlineno + 4


def _traces() -> tuple[dict[str, list[str]], int]:
    monitor = _TraceMonitor()
    lines: list[int] = []
    run_under_mocks(lambda: lines.append(_register_deep(5)), "dev", monitor)
    return monitor.traces, lines[0]


def test_the_state_keeps_only_the_frame_that_registered_the_resource(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sdk, "_get_stack_trace", sdk._get_stack_trace)  # restored after the test
    full, _ = _traces()
    assert len(full["deep"]) > 6, full  # the SDK's own: every caller, down to the event loop

    assert trim_stack_traces() and trim_stack_traces()  # idempotent: wrapped once
    trimmed, line = _traces()
    assert trimmed["deep"] == [f"{Path(__file__).resolve().as_uri()}#{line}"]
    assert trimmed["deep"][0] == full["deep"][0]  # the source position the engine shows is unchanged


def test_an_sdk_without_the_private_function_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(sdk, "_get_stack_trace")
    assert trim_stack_traces() is False
