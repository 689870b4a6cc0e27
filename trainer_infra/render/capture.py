"""Run the real Pulumi program under mocks and record every resource registration.

The mock engine hands us the raw RegisterResource requests, so we see what `pulumi up` would send:
inputs, parent, dependencies and protection options. Nothing here talks to a cluster or the CLI.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pulumi
from google.protobuf import json_format
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import settings as pulumi_settings
from pulumi.runtime.config import set_all_config
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from trainer_infra.stack.load import SECRET_PLACEHOLDER

SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
SIG_KEY = "4dabf18193072939515e22adb298388d"
PROJECT = "trainer-platform"


@dataclass(frozen=True)
class Registration:
    type: str
    name: str
    urn: str
    parent: str
    custom: bool
    inputs: dict[str, Any]
    dependencies: tuple[str, ...]
    protect: bool
    retain_on_delete: bool
    delete_before_replace: bool
    child_transforms: tuple[Any, ...] = field(default=(), compare=False)
    replace_on_changes: tuple[str, ...] = ()
    provider: str = ""  # the provider reference (`urn::id`); a fleet has one per cluster


def clean(value: Any) -> Any:
    """Secrets → `<secret>`; whole floats → ints (protobuf Struct has only doubles)."""
    if isinstance(value, dict):
        if value.get(SIG_KEY) == SECRET_SIG:
            return SECRET_PLACEHOLDER
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class _Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return {}, None


class _CapturingMonitor(pulumi_mocks.MockMonitor):
    def __init__(self) -> None:
        super().__init__(_Mocks())
        self.records: list[Registration] = []
        self.stack_outputs: dict[str, Any] = {}

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        if request.type != "pulumi:pulumi:Stack":
            inputs = clean(json_format.MessageToDict(request.object, preserving_proto_field_name=True))
            self.records.append(
                Registration(
                    type=request.type,
                    name=request.name,
                    urn=response.urn,
                    parent=request.parent,
                    custom=bool(request.custom),
                    inputs=inputs,
                    dependencies=tuple(sorted(set(request.dependencies))),
                    protect=bool(request.protect),
                    retain_on_delete=bool(request.retainOnDelete),
                    delete_before_replace=bool(request.deleteBeforeReplace),
                    child_transforms=tuple(pulumi_mocks._resolve_callbacks(request.transforms)),
                    replace_on_changes=tuple(request.replaceOnChanges),
                    provider=request.provider,
                )
            )
        return response

    def RegisterResourceOutputs(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        if "::pulumi:pulumi:Stack::" in request.urn:
            self.stack_outputs = clean(json_format.MessageToDict(request.outputs, preserving_proto_field_name=True))
        return super().RegisterResourceOutputs(request)  # type: ignore[no-untyped-call]


def _run_program(run: Callable[[], object]) -> None:
    run()
    # set_mocks registered the root Stack's (empty) outputs before the program ran; register the
    # exports now, as the real engine does at the end of a program.
    stack: Any = pulumi_settings.get_root_resource()
    stack._outputs_registered = False
    stack._finish()


@dataclass(frozen=True)
class Capture:
    registrations: list[Registration]
    stack_outputs: dict[str, Any]


def capture(program: Callable[[], object], stack: str) -> Capture:
    """Run `program` (it registers resources, e.g. `lambda: deploy(plan)`) against the capturing mock
    engine; returns every registration."""
    monitor = _CapturingMonitor()
    pulumi_settings.ROOT.set(None)  # a fresh stack per render
    pulumi.runtime.set_mocks(_Mocks(), project=PROJECT, stack=stack, preview=False, monitor=monitor)
    set_all_config({})
    pulumi_settings.SETTINGS.rpc_manager.clear()
    pulumi_settings.SETTINGS.outputs.clear()
    _sync_await(run_pulumi_func(lambda: _run_program(program)))
    return Capture(monitor.records, monitor.stack_outputs)
