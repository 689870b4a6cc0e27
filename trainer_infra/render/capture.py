"""Run the real Pulumi program under mocks and record every resource registration.

The mock engine hands us the raw RegisterResource requests, so we see what `pulumi up` would send:
inputs, parent, dependencies and protection options. Nothing here talks to a cluster or the CLI.
The caller hands over the program as a callable holding its validated model (no Pulumi config round trip).
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pulumi
from google.protobuf import struct_pb2
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import settings as pulumi_settings
from pulumi.runtime.config import set_all_config
from pulumi.runtime.proto import resource_pb2
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await

from trainer_infra.stack.load import SECRET_PLACEHOLDER

SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"
SIG_KEY = "4dabf18193072939515e22adb298388d"
PROJECT = "trainer-platform"
STACK_REFERENCE = "pulumi:pulumi:StackReference"


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
    ignore_changes: tuple[str, ...] = ()


def python_value(value: struct_pb2.Value) -> Any:
    """One protobuf Value as plain data, the way the request will reach the engine: secrets → `<secret>`,
    whole numbers → ints (Struct has only doubles). One pass, no JSON detour."""
    kind = value.WhichOneof("kind")
    if kind == "struct_value":
        return python_struct(value.struct_value)
    if kind == "list_value":
        return [python_value(v) for v in value.list_value.values]
    if kind == "number_value":
        number = value.number_value
        if not math.isfinite(number):
            raise ValueError(f"{number} is not a number JSON or Kubernetes accepts")
        return int(number) if number.is_integer() else number
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    return None


def python_struct(struct: struct_pb2.Struct) -> Any:
    fields = struct.fields
    if SIG_KEY in fields and fields[SIG_KEY].string_value == SECRET_SIG:
        return SECRET_PLACEHOLDER
    return {key: python_value(v) for key, v in fields.items()}


class EchoMocks(pulumi.runtime.Mocks):
    """Every resource gets the id `<name>-id` and its inputs as outputs, as after a create. A StackReference
    (read, not registered) answers with `references[stack]`: the placeholders of the outputs the program reads."""

    def __init__(self, references: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self.references = references or {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[str, Any]]:
        if args.typ == STACK_REFERENCE:
            name = str(args.inputs.get("name", args.resource_id))
            return name, {"name": name, "outputs": dict(self.references.get(name, {}))}
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]] | None]:
        return {}, None


class _CapturingMonitor(pulumi_mocks.MockMonitor):
    def __init__(self, references: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        super().__init__(EchoMocks(references))
        self.records: list[Registration] = []
        self.stack_outputs: dict[str, Any] = {}

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        """Record the request as sent; answer like the stock monitor with EchoMocks (id `<name>-id`,
        outputs = inputs) but hand back the request's own Struct instead of deserialising it into Python
        and serialising it again: same response, the per-property work done once (for the record)."""
        urn = self.make_urn(request.parent, request.type, request.name)
        if request.type == "pulumi:pulumi:Stack":
            return resource_pb2.RegisterResourceResponse(urn=urn)
        self.records.append(
            Registration(
                type=request.type,
                name=request.name,
                urn=urn,
                parent=request.parent,
                custom=bool(request.custom),
                inputs=python_struct(request.object),
                dependencies=tuple(sorted(set(request.dependencies))),
                protect=bool(request.protect),
                retain_on_delete=bool(request.retainOnDelete),
                delete_before_replace=bool(request.deleteBeforeReplace),
                child_transforms=tuple(pulumi_mocks._resolve_callbacks(request.transforms)),
                replace_on_changes=tuple(request.replaceOnChanges),
                provider=request.provider,
                ignore_changes=tuple(request.ignoreChanges),
            )
        )
        return resource_pb2.RegisterResourceResponse(urn=urn, id=f"{request.name}-id", object=request.object)

    def RegisterResourceOutputs(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        if "::pulumi:pulumi:Stack::" in request.urn:
            self.stack_outputs = python_struct(request.outputs)
        return super().RegisterResourceOutputs(request)  # type: ignore[no-untyped-call]


def _run_program(program: Callable[[], object]) -> None:
    program()
    # set_mocks registered the root Stack's (empty) outputs before the program ran; register the
    # exports now, as the real engine does at the end of a program.
    stack: Any = pulumi_settings.get_root_resource()
    stack._outputs_registered = False
    stack._finish()


@dataclass(frozen=True)
class Capture:
    registrations: list[Registration]
    stack_outputs: dict[str, Any]


def capture(
    program: Callable[[], object], stack: str, references: Mapping[str, Mapping[str, Any]] | None = None
) -> Capture:
    """Run `program` (a zero-argument callable that registers the resources) against the capturing mock
    engine; returns every registration and the stack outputs. `references`: what each other stack the program
    reads exports (core/cloud.py placeholder_outputs)."""
    monitor = _CapturingMonitor(references)
    with gc_paused():
        run_under_mocks(lambda: _run_program(program), stack, monitor)
    return Capture(monitor.records, monitor.stack_outputs)


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while the program registers: it builds one big, mostly acyclic graph
    that lives until the render ends, and the collector would walk the growing heap thousands of times
    for nothing (a third of the render's CPU at 1,000 teams). Reference counting still frees everything
    else; the cycles left (asyncio futures) are collected once the collector is back on."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def run_under_mocks(program: Callable[[], None], stack: str, monitor: pulumi_mocks.MockMonitor) -> None:
    """A fresh root stack on `monitor`, then `program` to completion (all registrations awaited).
    `make bench` times its floor through this too, so render and floor share the engine setup."""
    pulumi_settings.ROOT.set(None)
    pulumi.runtime.set_mocks(monitor.mocks, project=PROJECT, stack=stack, preview=False, monitor=monitor)
    set_all_config({})  # the program gets its model from the caller, never from Pulumi config
    pulumi_settings.SETTINGS.rpc_manager.clear()
    pulumi_settings.SETTINGS.outputs.clear()
    _sync_await(run_pulumi_func(program))
