"""Any Kubernetes object dict as one Pulumi resource, so render sees exactly the manifest we built."""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi_kubernetes import _utilities as k8s_utilities

from trainer_infra.core.objects import SecretValue
from trainer_infra.core.upstream import kubernetes


def type_token(api_version: str, kind: str) -> str:
    """The pulumi-kubernetes token: `v1` → `kubernetes:core/v1:Namespace`."""
    group_version = api_version if "/" in api_version else f"core/{api_version}"
    return f"kubernetes:{group_version}:{kind}"


def wrap_secrets(value: Any) -> Any:
    """SecretValue leaves become Pulumi secrets: encrypted in state, `[secret]` in previews. Returns
    `value` itself when it holds no secret (most objects), so the manifest is not copied for nothing."""
    if not holds_secret(value):
        return value
    if isinstance(value, SecretValue):
        return pulumi.Output.secret(str(value))
    if isinstance(value, pulumi.Output):
        return value
    if isinstance(value, dict):
        return {k: wrap_secrets(v) for k, v in value.items()}
    return [wrap_secrets(v) for v in value]


def holds_secret(value: Any) -> bool:
    """Whether a SecretValue sits anywhere in `value`; a loop, not recursion: it runs over every manifest."""
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, SecretValue):
            return True
    return False


class KubernetesObject(pulumi.CustomResource):
    """A typed-token resource built from a whole manifest (the provider treats it like its typed class)."""

    def __init__(
        self, name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions | None = None, patch: bool = False
    ) -> None:
        version = k8s_utilities.get_version()  # type: ignore[no-untyped-call]
        extra = pulumi.ResourceOptions(version=version)
        props = wrap_secrets(manifest)
        if manifest["kind"] == "Secret":
            extra.additional_secret_outputs = ["data", "stringData"]
            if manifest.get("type") == kubernetes.SERVICE_ACCOUNT_TOKEN_TYPE:
                props["data"] = None  # filled by the token controller; the provider waits for it (read as .data)
        super().__init__(
            type_token(manifest["apiVersion"], manifest["kind"] + ("Patch" if patch else "")),
            name,
            props,
            pulumi.ResourceOptions.merge(extra, opts),
        )
