"""A fleet's render: the one program under mocks (every cluster in one run, as `pulumi preview` sees it),
then split per cluster so each cluster's objects are reviewed, policy-checked and diffed on their own."""

from __future__ import annotations

from dataclasses import replace

from trainer_infra.core.objects import FleetPlan
from trainer_infra.platform.component import TYPE as PLATFORM_TYPE
from trainer_infra.program import deploy_fleet
from trainer_infra.render.capture import Capture, Registration, capture
from trainer_infra.render.output import Rendered, assemble


def _cluster_of(record: Registration, by_urn: dict[str, Registration]) -> str | None:
    current: Registration | None = record
    while current is not None:
        if current.type == PLATFORM_TYPE:
            return current.name
        current = by_urn.get(current.parent)
    return None


def split(captured: Capture) -> dict[str, Capture]:
    """Registrations per cluster (the TrainingPlatform each descends from), with that cluster's outputs."""
    by_urn = {r.urn: r for r in captured.registrations}
    out: dict[str, list[Registration]] = {}
    for r in captured.registrations:
        cluster = _cluster_of(r, by_urn)
        if cluster is not None:
            out.setdefault(cluster, []).append(r)
    outputs = captured.stack_outputs.get("clusters", {})
    return {
        c: replace(captured, registrations=[_local(r, f"{c}-") for r in rs], stack_outputs=outputs.get(c, {}))
        for c, rs in out.items()
    }


def _strip(urn: str, prefix: str) -> str:
    head, sep, name = urn.rpartition("::")
    return f"{head}{sep}{name.removeprefix(prefix)}" if sep else urn.removeprefix(prefix)


def _local(r: Registration, prefix: str) -> Registration:
    """Names as the cluster's own render shows them (the cluster prefix only keeps Pulumi names unique
    within the fleet); a dependency on another cluster keeps its prefix."""
    return replace(
        r,
        name=r.name.removeprefix(prefix),
        urn=_strip(r.urn, prefix),
        parent=_strip(r.parent, prefix),
        dependencies=tuple(_strip(d, prefix) for d in r.dependencies),
    )


def render_fleet(fleet: FleetPlan, stack: str) -> dict[str, Rendered]:
    captured = capture(lambda: deploy_fleet(fleet), stack)
    return {cluster: assemble(part) for cluster, part in sorted(split(captured).items())}
