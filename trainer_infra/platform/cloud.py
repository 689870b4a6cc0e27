"""The plan's cloud resources as the SDKs' own typed classes: one explicit provider per `CloudProvider`, one
`pulumi.StackReference` per stack whose outputs a resource reads, then `<sdk>.<module>.<Class>(name, **args)`.

The SDK is imported here and only here, when a stack uses it: a stack without cloud pools never needs one.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi

from trainer_infra.core.cloud import CloudProvider, CloudResource, CloudSdk, ResourceOutput, StackOutput


class MissingSdk(pulumi.RunError):
    """A stack uses a cloud backend whose SDK is not installed: `pulumi up` shows the one line that fixes it."""

    def __init__(self, sdk: CloudSdk) -> None:
        super().__init__(sdk.missing)


def import_sdk(sdk: CloudSdk, module: str = "") -> Any:
    """`pulumi_gcp` (or one of its modules, e.g. `container`), or MissingSdk."""
    try:
        return importlib.import_module(f"{sdk.module}.{module}" if module else sdk.module)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (exc.name == sdk.module or exc.name.startswith(sdk.module + ".")):
            raise MissingSdk(sdk) from None
        raise


class _References:
    """One StackReference per stack, created on first use."""

    def __init__(self, prefix: str, opts: pulumi.ResourceOptions) -> None:
        self._prefix, self._opts = prefix, opts
        self._stacks: dict[str, pulumi.StackReference] = {}
        self.created: dict[str, pulumi.Resource] = {}

    def resource_output(self, ref: ResourceOutput) -> pulumi.Output[Any]:
        def shown(value: Any) -> Any:
            if value is None:  # the mock engine of offline render: the provider computes it
                return ref.placeholder()
            return str(value) if ref.as_string else value

        return pulumi.Output.from_input(getattr(self.created[ref.resource], ref.attribute)).apply(shown)

    def output(self, ref: StackOutput) -> pulumi.Output[Any]:
        stack = self._stacks.get(ref.stack)
        if stack is None:
            name = f"{self._prefix}stack-{ref.stack.replace('/', '-')}"
            stack = self._stacks[ref.stack] = pulumi.StackReference(name, ref.stack, opts=self._opts)
        return stack.require_output(ref.output)

    def resolve(self, value: Any) -> Any:
        """`value` with every StackOutput replaced by the stack's output, every ResourceOutput by the output of the
        resource already created under that plan name."""
        if isinstance(value, StackOutput):
            return self.output(value)
        if isinstance(value, ResourceOutput):
            return self.resource_output(value)
        if isinstance(value, Mapping):
            return {k: self.resolve(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.resolve(v) for v in value]
        return value


def register_cloud_resources(
    resources: Sequence[CloudResource], prefix: str, parent: pulumi.Resource
) -> dict[str, pulumi.Resource]:
    """Every cloud resource of a plan, each through its cluster's explicit provider; returned by plan name."""
    opts = pulumi.ResourceOptions(parent=parent)
    refs = _References(prefix, opts)
    providers: dict[str, pulumi.ProviderResource] = {}
    created = refs.created

    def provider(spec: CloudProvider) -> pulumi.ProviderResource:
        if spec.name not in providers:
            sdk = import_sdk(spec.sdk)
            providers[spec.name] = sdk.Provider(prefix + spec.name, opts=opts, **refs.resolve(dict(spec.args)))
        return providers[spec.name]

    for res in resources:
        cls = getattr(import_sdk(res.sdk, res.module), res.resource)
        o = res.options
        created[res.name] = cls(
            prefix + res.name,
            opts=pulumi.ResourceOptions(
                parent=parent,
                provider=provider(res.provider),
                protect=o.protect,
                retain_on_delete=o.retain_on_delete,
                ignore_changes=list(o.ignore_changes) or None,
                replace_on_changes=list(o.replace_on_changes) or None,
                # None unless asked for: an explicit False would override the provider's own choice
                delete_before_replace=o.delete_before_replace or None,
            ),
            **refs.resolve(dict(res.args)),
        )
    return created
