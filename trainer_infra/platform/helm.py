"""Charts as `helm.v4.Chart`.

Why v4 and not `helm.v3.Release`: v4 renders like `helm template` and registers every chart object as
its own Pulumi resource, so `pulumi preview --diff` in a pull request shows per-object changes, and
CRDs are applied on upgrade (Helm never upgrades `crds/`, jobset#893). It skips Helm hooks
(pulumi-kubernetes#3284); that is what we want: the only hook we would meet, Trainer 2.3's runtime
installer, needs internet and we own the runtimes anyway.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pulumi.runtime import rpc

from trainer_infra.core.objects import HelmRelease
from trainer_infra.core.upstream import kubernetes
from trainer_infra.manifests.meta import LEAVING
from trainer_infra.platform import crd_order

CRD_TYPE = f"kubernetes:{kubernetes.APIEXTENSIONS_API}:CustomResourceDefinition"
SECRET_TYPE = "kubernetes:core/v1:Secret"

#: the chart's workloads after its CRDs (crd_order.py): Helm runs `python3 -c <crd_order.py>` on the rendered
#: manifest; the script's text, not a path, is the chart's input
CRD_ORDER_COMMAND, CRD_ORDER_ARGS = "python3", ["-c", Path(crd_order.__file__).read_text()]
#: as the engine receives them (what the offline render compares)
CRD_ORDER_INPUTS: dict[str, object] = {"command": CRD_ORDER_COMMAND, "args": CRD_ORDER_ARGS}


def protect_crds(protect: bool, leaving: bool = False) -> pulumi.ResourceTransform:
    """Deleting a CRD deletes every object of its kind (all TrainJobs, all ClusterQueues): keep
    chart CRDs protected (no delete, no replace) and retained in the cluster if ever dropped.

    `leaving` (a draining fleet worker): every chart object is retained and none protected, so that removing the
    worker from the stack makes Pulumi forget the install and the cluster keeps it running; the CRDs carry the
    mark the data-is-protected rule accepts."""

    def transform(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
        if leaving:
            props = _marked_leaving(args.props) if args.type_ == CRD_TYPE else args.props
            keep = pulumi.ResourceOptions(protect=False, retain_on_delete=True)
            return pulumi.ResourceTransformResult(props=props, opts=pulumi.ResourceOptions.merge(args.opts, keep))
        if args.type_ != CRD_TYPE:
            return None
        opts = pulumi.ResourceOptions.merge(
            args.opts, pulumi.ResourceOptions(protect=protect, retain_on_delete=protect)
        )
        return pulumi.ResourceTransformResult(props=args.props, opts=opts)

    return transform


def _marked_leaving(props: Mapping[str, Any]) -> dict[str, Any]:
    meta = dict(props.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), LEAVING: "true"}
    return {**props, "metadata": meta}


def controller_filled(data: Any) -> bool:
    """A chart Secret whose every `data` value is empty is a placeholder its controller fills at run time
    (JobSet 0.12's and Trainer 2.2's webhook certificates)."""
    return isinstance(data, Mapping) and bool(data) and all(v in ("", None) for v in data.values())


async def plain(value: Any) -> Any:
    """A property as a transform receives it, as plain data. The engine hands a chart Secret's `data` over as
    one Pulumi secret (an RPC secret or an `Output`, by the SDK's wire format), never as the map itself."""
    if isinstance(value, pulumi.Output):
        return await plain(await value.future())
    if rpc.is_rpc_secret(value):
        return await plain(rpc.unwrap_rpc_secret(value))
    if isinstance(value, Mapping):
        return {k: await plain(v) for k, v in value.items()}
    return value


def leave_controller_secrets(
    args: pulumi.ResourceTransformArgs,
) -> Awaitable[pulumi.ResourceTransformResult | None] | None:
    """Create such a Secret without `data` and never diff `data`: the controller owns its content.

    Applied as the chart ships it, Pulumi's server-side apply co-owns the empty keys; a later `pulumi up`
    that touches the Secret then conflicts with the controller's field ownership (kubernetes-sigs/jobset#1205)
    or, forced, blanks the certificates and every admission through that webhook fails; and a refreshed
    preview (the drift check) proposes replacing the Secret with the controller's certificates (`data` is
    immutable for the provider).
    """
    # decided here for every other object, so that the offline render (which calls transforms synchronously)
    # and the engine (which awaits one that needs it) both run it
    return _without_data(args) if args.type_ == SECRET_TYPE else None


async def _without_data(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
    data = await plain(args.props.get("data"))
    if not controller_filled(data):
        return None
    props = {k: v for k, v in args.props.items() if k != "data"}
    opts = pulumi.ResourceOptions.merge(args.opts, pulumi.ResourceOptions(ignore_changes=["data"]))
    return pulumi.ResourceTransformResult(props=props, opts=opts)


def with_objects(chart: k8s.helm.v4.Chart) -> pulumi.Output[list[pulumi.Resource]]:
    """The chart and every object it rendered, for `depends_on`.

    Depending on the chart component alone orders creation but not deletion: the engine deletes a
    component's children and the component's dependents in no set order, so a destroy could delete the
    Trainer controller's Deployment before the ClusterTrainingRuntimes whose `resource-in-use` finalizer
    only that controller removes (and Kueue's before its queues and flavors): the destroy hangs.
    Objects of kinds the SDK has no class for arrive as ids, not resources; none of them runs a controller.
    """
    return chart.resources.apply(lambda objs: [chart, *(o for o in objs or [] if isinstance(o, pulumi.Resource))])


def chart(
    release: HelmRelease, protect: bool, opts: pulumi.ResourceOptions, leaving: bool = False
) -> k8s.helm.v4.Chart:
    return k8s.helm.v4.Chart(
        release.name,
        k8s.helm.v4.ChartArgs(
            chart=release.chart,
            version=release.chart_version,
            namespace=release.namespace,
            values=release.values,
            skip_await=False,
            post_renderer=k8s.helm.v4.PostRendererArgs(command=CRD_ORDER_COMMAND, args=CRD_ORDER_ARGS),
            repository_opts=k8s.helm.v4.RepositoryOptsArgs(repo=release.repository) if release.repository else None,
        ),
        opts=pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(transforms=[protect_crds(protect, leaving), leave_controller_secrets])
        ),
    )
