"""Transforms on chart objects: what Pulumi applies of the charts' own manifests."""

from __future__ import annotations

import asyncio
import io
import tarfile
from typing import Any

import pulumi
import pytest
import yaml
from pulumi.runtime import rpc

from trainer_infra.platform.helm import SECRET_TYPE, leave_controller_secrets
from trainer_infra.sandbox.versions import shared_dir


def _args(type_: str, props: dict[str, Any]) -> pulumi.ResourceTransformArgs:
    return pulumi.ResourceTransformArgs(custom=True, type_=type_, name="x", props=props, opts=pulumi.ResourceOptions())


def _chart_secret_data(archive: str, template: str) -> dict[str, Any]:
    """The literal `data:` block of a chart's Secret template (it has no template expressions)."""
    path = shared_dir() / "charts" / archive
    if not path.exists():
        pytest.skip(f"{path} not present (TRAINER_PLATFORM_SHARED)")
    with tarfile.open(path) as tar:
        member = tar.extractfile(template)
        assert member is not None
        text = member.read().decode()
    block = text[text.index("\ndata:\n") :].split("{{", 1)[0]
    data: dict[str, Any] = yaml.safe_load(io.StringIO(block))["data"]
    return data


def _transform(type_: str, props: dict[str, Any], wrap: str = "plain") -> pulumi.ResourceTransformResult | None:
    """Run the transform with `data` in the form `wrap`: how the engine hands it over (an RPC secret, or an
    `Output` secret, by the SDK's wire format) or plain."""

    async def run() -> pulumi.ResourceTransformResult | None:
        given = dict(props)
        if "data" in given and wrap == "rpc-secret":
            given["data"] = rpc.wrap_rpc_secret(given["data"])
        elif "data" in given and wrap == "output-secret":
            given["data"] = pulumi.Output.secret(given["data"])
        result = leave_controller_secrets(_args(type_, given))
        return await result if result is not None else None

    loop = asyncio.new_event_loop()  # not asyncio.run: it unsets the thread's loop other tests' mocks rely on
    try:
        return loop.run_until_complete(run())
    finally:
        loop.close()


WRAPS = ("rpc-secret", "output-secret", "plain")


@pytest.mark.parametrize(
    ("archive", "template"),
    [
        ("jobset-0.12.0.tgz", "jobset/templates/internalcert/secret.yaml"),
        ("kubeflow-trainer-2.2.1.tgz", "kubeflow-trainer/templates/webhook/secret.yaml"),
    ],
)
@pytest.mark.parametrize("wrap", WRAPS)
def test_webhook_cert_placeholders_are_created_without_data_and_never_diffed(
    archive: str, template: str, wrap: str
) -> None:
    """The engine hands a chart Secret's `data` to the transform as one Pulumi secret (the first real drift
    check found the placeholders applied as shipped: `preview --refresh` then proposed replacing the Secrets)."""
    data = _chart_secret_data(archive, template)
    assert data and set(data.values()) == {""}, "the chart ships empty keys the controller fills"
    props = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "webhook-cert"}, "data": data}
    result = _transform(SECRET_TYPE, props, wrap)
    assert result is not None
    assert "data" not in result.props and result.props["metadata"] == {"name": "webhook-cert"}
    assert result.opts is not None and result.opts.ignore_changes == ["data"]


@pytest.mark.parametrize("wrap", WRAPS)
def test_secrets_with_content_and_other_kinds_are_left_alone(wrap: str) -> None:
    filled = {"apiVersion": "v1", "kind": "Secret", "data": {"token": "c2VjcmV0"}}
    assert _transform(SECRET_TYPE, filled, wrap) is None
    assert _transform(SECRET_TYPE, {"kind": "Secret"}, wrap) is None
    config = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": ""}}
    assert _transform("kubernetes:core/v1:ConfigMap", config, wrap) is None
