"""The replica specs of a v1 job: which replica types it has, the role each plays in a TrainJob, and the
training container of each."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainer_infra.core.errors import did_you_mean
from trainer_infra.manifests.runtime import get_in
from trainer_infra.migrate.kinds import Kind, Role
from trainer_infra.migrate.result import Conversion, Path


@dataclass
class Replica:
    type: str
    role: Role
    path: Path
    spec: dict[str, Any]
    container: int  # index of the training container

    @property
    def pod(self) -> dict[str, Any]:
        pod: dict[str, Any] = get_in(self.spec, "template", "spec") or {}
        return pod

    @property
    def main(self) -> dict[str, Any]:
        main: dict[str, Any] = self.pod["containers"][self.container]
        return main

    @property
    def container_path(self) -> Path:
        return (*self.path, "template", "spec", "containers", self.container)


def read_replicas(c: Conversion, kind: Kind) -> list[Replica]:
    r = c.result
    base: Path = ("spec", kind.replicas_field)
    specs = get_in(c.obj, "spec", kind.replicas_field)
    if not isinstance(specs, dict) or not specs:
        r.error(base, "required: at least one replica spec", f"expected {', '.join(t for t, _ in kind.roles)}")
        return []
    out: list[Replica] = []
    order = [t for t, _ in kind.roles]
    for rtype in sorted(specs, key=lambda t: order.index(t) if t in order else len(order)):
        spec, path = specs[rtype], (*base, str(rtype))
        role = kind.role(str(rtype))
        if role is None:
            r.error(
                path,
                f"unknown replica type {rtype!r} for {kind.kind}",
                did_you_mean(str(rtype), order) or f"expected one of {', '.join(order)}",
            )
            continue
        if not isinstance(spec, dict):
            r.error(path, "expected an object")
            continue
        if role is Role.NONE:
            c.lossy(path, f"{rtype} replicas: v2 has no place for them (one kind of training node per job)")
            c.skip.add(path)
            continue
        containers = get_in(spec, "template", "spec", "containers")
        cpath = (*path, "template", "spec", "containers")
        if not isinstance(containers, list) or not containers or not all(isinstance(item, dict) for item in containers):
            r.error(cpath, "required: at least one container")
            continue
        index = main_container(c, kind, containers, cpath, report=role is not Role.SAME)
        if index is None:
            continue
        out.append(Replica(str(rtype), role, path, spec, index))
    trainers = [x.type for x in out if x.role is Role.TRAINER]
    if len(trainers) > 1:
        r.error(base, f"{' and '.join(trainers)} both lead the job; v1 accepts only one")
    if out and not any(x.role in (Role.TRAINER, Role.SAME) for x in out):
        r.error(base, f"no replica type runs the training (expected {order[0]})")
    return [] if r.errors else out


def main_container(c: Conversion, kind: Kind, containers: list[dict[str, Any]], path: Path, report: bool) -> int | None:
    """The training container; the others are reported (not for SAME replicas: their template is
    compared with the trainer's as a whole)."""
    names = [item.get("name") for item in containers]
    wanted = get_in(c.obj, "spec", "mainContainer") or kind.container
    if wanted in names:
        index = names.index(wanted)
    elif len(containers) == 1:
        index = 0
    else:
        c.result.error(
            path,
            f"cannot tell the training container among {names}",
            f"name it {wanted!r}" if wanted else "set spec.mainContainer",
        )
        return None
    if not containers[index].get("image"):
        c.result.error((*path, index, "image"), "required: the training container's image")
        return None
    for i, other in enumerate(containers):
        if i != index and report:
            c.lossy(
                (*path, i),
                f"container {other.get('name')!r}: runtimePatches cannot add a container "
                "to the runtime's pods (sidecars are not expressible)",
            )
            c.skip.add((*path, i))
    return index


# --- field table ------------------------------------------------------------------------------
