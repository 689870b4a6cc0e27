"""Resources of the cloud providers' Pulumi SDKs (a GKE node pool, an EKS node group, an AKS agent pool), as plain
data: which SDK class, its keyword arguments, the provider it goes through and its resource options.

A backend builds these; the Pulumi step (platform/cloud.py) imports the SDK, builds one explicit provider per
`CloudProvider` and instantiates the SDK's own typed class. Everything before that step stays testable without
Pulumi or the SDKs installed. Values only another stack knows (the cluster stack's outputs) are `StackOutput`
placeholders that the Pulumi step reads through a `pulumi.StackReference`.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

#: The provider packages a cloud backend may use: the Pulumi package name (first part of its type tokens).
CloudPackage = Literal["gcp", "aws", "azure-native"]


@dataclass(frozen=True)
class CloudSdk:
    """A provider's Python SDK and the extra of this package that installs it."""

    package: CloudPackage
    module: str  # the import name, e.g. pulumi_gcp
    distribution: str  # the PyPI name, e.g. pulumi-gcp
    extra: str  # `pip install 'trainer-platform[<extra>]'`

    @property
    def install_hint(self) -> str:
        return f"pip install 'trainer-platform[{self.extra}]'"

    @property
    def missing(self) -> str:
        """The one line shown when the SDK is not installed."""
        return f"this stack's {self.package} node pools need {self.distribution}: {self.install_hint}"


class MissingSdkError(Exception):
    """A stack uses a cloud backend whose SDK is not installed (the CLI prints the one line and exits 2)."""


def check_sdks(resources: tuple[CloudResource, ...]) -> None:
    """Before a render: every SDK the resources use is importable, else MissingSdkError naming the pip install."""
    for sdk in sorted({r.sdk for r in resources}, key=lambda s: s.package):
        if importlib.util.find_spec(sdk.module) is None:
            raise MissingSdkError(sdk.missing)


#: One home per SDK: backends name their provider by these.
GCP = CloudSdk("gcp", "pulumi_gcp", "pulumi-gcp", "gcp")
AWS = CloudSdk("aws", "pulumi_aws", "pulumi-aws", "aws")
AZURE = CloudSdk("azure-native", "pulumi_azure_native", "pulumi-azure-native", "azure")
SDKS: dict[str, CloudSdk] = {s.package: s for s in (GCP, AWS, AZURE)}


@dataclass(frozen=True)
class StackOutput:
    """An output of another stack (`org/project/stack`), e.g. the cluster stack's `clusterName`: the Pulumi step
    reads it through one `pulumi.StackReference` per stack; render shows `<stack-output org/project/stack#name>`."""

    stack: str
    output: str

    def placeholder(self) -> str:
        return f"<stack-output {self.stack}#{self.output}>"


@dataclass(frozen=True)
class ResourceOutput:
    """An output of another resource of the same plan, named as in the plan (a node group takes its launch
    template's `id` and `latest_version`): the Pulumi step passes that resource's output, which also orders the
    two; `as_string` for an SDK argument that takes a string (a version number). Render shows `placeholder()`
    where the mock engine has no value (outputs the provider computes)."""

    resource: str
    attribute: str
    as_string: bool = False

    def placeholder(self) -> str:
        return f"<output {self.resource}#{self.attribute}>"


#: A value a backend passes on: plain data, or a stack output resolved by the Pulumi step.
Ref = str | StackOutput


def sdk_value(value: Ref | ResourceOutput) -> Any:
    """A Ref where an SDK argument takes a `pulumi.Input`: typed Any so a backend's args stay checked against the SDK
    everywhere else; a StackOutput stays a placeholder until the Pulumi step reads the stack."""
    return value


@dataclass(frozen=True)
class CloudProvider:
    """An explicit provider instance: one per SDK and cluster (a fleet has several). `args` are the SDK Provider's
    keyword arguments (project/region, region, subscription): never credentials, which come from the environment
    where `pulumi` runs (gcloud ADC, AWS_PROFILE, az login / ARM_*)."""

    sdk: CloudSdk
    name: str  # resource name of the provider, unique in the plan
    args: Mapping[str, Ref] = field(default_factory=dict)


@dataclass(frozen=True)
class CloudOptions:
    """Pulumi resource options, each chosen on purpose by the backend (see the backend module for why)."""

    protect: bool = True
    retain_on_delete: bool = False
    # Properties someone else changes (the cluster autoscaler's node count): `pulumi up` leaves them alone.
    ignore_changes: tuple[str, ...] = ()
    # Never set to make a replace silent: a node pool is replaced only when the provider itself demands it.
    replace_on_changes: tuple[str, ...] = ()
    delete_before_replace: bool = False


@dataclass(frozen=True)
class CloudResource:
    """One resource of a cloud SDK: `<sdk.module>.<module>.<resource>(name, **args, opts=...)`, e.g.
    `pulumi_gcp.container.NodePool`. `args` are the class's keyword arguments, snake_case as the SDK names them,
    nested values as its `...ArgsDict` typed dicts (the backend types them against the SDK, so `mypy --strict`
    checks them); any leaf may be a `StackOutput`. `type_token` is the token the class registers with (render and
    tests compare it)."""

    provider: CloudProvider
    module: str
    resource: str
    type_token: str
    name: str
    args: Mapping[str, Any]
    options: CloudOptions = field(default_factory=CloudOptions)

    @property
    def sdk(self) -> CloudSdk:
        return self.provider.sdk


def stack_outputs(value: Any) -> list[StackOutput]:
    """Every StackOutput in `value` (args or provider args), in order of appearance."""
    if isinstance(value, StackOutput):
        return [value]
    if isinstance(value, Mapping):
        return [o for v in value.values() for o in stack_outputs(v)]
    if isinstance(value, list | tuple):
        return [o for v in value for o in stack_outputs(v)]
    return []


def placeholder_outputs(resources: tuple[CloudResource, ...]) -> dict[str, dict[str, str]]:
    """What offline render answers for each stack the resources read: `{stack: {output: placeholder}}`."""
    out: dict[str, dict[str, str]] = {}
    for res in resources:
        for ref in stack_outputs(res.args) + stack_outputs(res.provider.args):
            out.setdefault(ref.stack, {})[ref.output] = ref.placeholder()
    return out
