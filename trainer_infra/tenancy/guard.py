"""`trainer-infra validate --previous`: refuse a config change that would delete or replace user data.

Offline there is no Pulumi state, so the previous deployment is given explicitly: the directory a
previous `trainer-infra render` wrote (CI renders the merge base), or the previous stack file (e.g.
`git show main:stacks/Pulumi.prod.yaml > /tmp/prev.yaml`). We compare it with the plan of the current
config exactly as Pulumi will: an object that was `protect`ed in the previous deployment cannot be
deleted or replaced in this one (`pulumi up` fails on it). The opt-in is therefore always two steps —
`teams[].decommission: true` (or `allowDataLoss: true`) drops the protection in one `pulumi up`, the
removal happens in a later one — and this check explains what each step would lose.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trainer_infra.core.objects import ManagedObject, Plan
from trainer_infra.core.quantity import quantity
from trainer_infra.teams.model import TeamConfig
from trainer_infra.teams.protection import TEAM_LABEL

# Fields whose change makes Pulumi replace the object (pulumi-kubernetes force-new fields) or that
# the API server refuses to update (StorageClass reclaimPolicy/volumeBindingMode, PVC volumeMode).
REPLACED_BY: dict[str, tuple[tuple[str, ...], ...]] = {
    "PersistentVolumeClaim": (
        ("spec", "accessModes"),
        ("spec", "storageClassName"),
        ("spec", "selector"),
        ("spec", "volumeName"),
        ("spec", "volumeMode"),
    ),
    "StorageClass": (("provisioner",), ("parameters",), ("reclaimPolicy",), ("volumeBindingMode",)),
    "Namespace": (),
}


@dataclass(frozen=True)
class Deployed:
    manifest: dict[str, Any]
    protect: bool


@dataclass(frozen=True)
class Loss:
    """One object the change would delete or replace. `refused` when Pulumi would refuse it too."""

    path: str
    message: str
    hint: str
    refused: bool

    def render(self) -> str:
        return f"{self.path}: {self.message}\n    hint: {self.hint}"


def from_plan(plan: Plan) -> dict[str, Deployed]:
    return {o.key: Deployed(o.manifest, o.protect) for o in plan.objects}


def from_render_dir(out: Path) -> dict[str, Deployed]:
    """What `trainer-infra render` wrote: manifests.yaml (the objects) and resources.json (protection)."""
    manifests = [m for m in yaml.safe_load_all((out / "manifests.yaml").read_text()) if m]
    protect = {r["name"]: bool(r["protect"]) for r in json.loads((out / "resources.json").read_text())}
    deployed = {}
    for manifest in manifests:
        key = ManagedObject(manifest).key
        deployed[key] = Deployed(manifest, protect.get(key, False))
    return deployed


def _get(obj: dict[str, Any], path: tuple[str, ...]) -> Any:
    for part in path:
        obj = obj.get(part, {}) if isinstance(obj, dict) else {}
    return obj or None


def _what(manifest: dict[str, Any]) -> str:
    md, kind = manifest["metadata"], manifest["kind"]
    if kind == "Namespace":
        return f"namespace {md['name']} with everything in it (TrainJobs, Secrets, the team claim and its data)"
    if kind == "PersistentVolumeClaim":
        spec = manifest["spec"]
        size, sc = spec["resources"]["requests"]["storage"], spec["storageClassName"]
        return f"claim {md['namespace']}/{md['name']} ({size}, class {sc}): the team's data"
    if kind == "StorageClass":
        return f"StorageClass {md['name']} ({manifest['provisioner']}), where every team claim lives"
    return f"{kind} {md['name']}"


def _team_path(teams: Sequence[TeamConfig], manifest: dict[str, Any]) -> tuple[str, str | None]:
    """Config path of the object's team, and the team name when the team left the config."""
    team = manifest["metadata"].get("labels", {}).get(TEAM_LABEL) or (
        manifest["metadata"]["name"] if manifest["kind"] == "Namespace" else None
    )
    for i, t in enumerate(teams):
        if t.name == team or (manifest["kind"] == "Namespace" and t.resolved_namespace == manifest["metadata"]["name"]):
            return f"teams[{i}]", None
    return "teams", team


def _hint(teams: Sequence[TeamConfig], manifest: dict[str, Any], team_gone: str | None) -> str:
    if manifest["kind"] == "StorageClass":
        return (
            "move team data deliberately: set allowDataLoss: true and run pulumi up (drops the protection, "
            "deletes nothing), then change storage; volumes already bound keep their data"
        )
    team = team_gone or "<team>"
    return (
        f"to remove team '{team}' on purpose, keep it in teams[] with decommission: true and run pulumi up "
        "(drops the protection, deletes nothing); copy out what you need; then remove the team"
    )


def _holds_data(manifest: dict[str, Any], protect: bool) -> bool:
    """Team namespaces and claims (protected or decommissioned) and protected StorageClasses."""
    team = TEAM_LABEL in manifest["metadata"].get("labels", {})
    return manifest["kind"] in REPLACED_BY and (protect or (team and manifest["kind"] != "StorageClass"))


def data_loss(previous: dict[str, Deployed], plan: Plan, teams: Sequence[TeamConfig]) -> list[Loss]:
    current = {o.key: o for o in plan.objects}
    losses: list[Loss] = []
    for key, old in sorted(previous.items()):
        kind = old.manifest["kind"]
        if not _holds_data(old.manifest, old.protect):
            continue
        path, team_gone = _team_path(teams, old.manifest) if kind != "StorageClass" else ("storage", None)
        what = _what(old.manifest)
        new = current.get(key)
        if new is None:
            if team_gone:
                path = f"{path} (team '{team_gone}' removed)"
            if old.protect:
                message = f"would delete {what}, which is protected in the previous deployment"
                losses.append(Loss(path, message, _hint(teams, old.manifest, team_gone), True))
            else:
                message = f"will DELETE {what} (its protection was dropped earlier)"
                losses.append(Loss(path, message, "make sure its data is copied or no longer needed", False))
            continue
        changed = [".".join(f) for f in REPLACED_BY[kind] if _get(old.manifest, f) != _get(new.manifest, f)]
        if kind == "PersistentVolumeClaim":
            path += ".storage" if path.startswith("teams[") else ""
            was, now = (m["spec"]["resources"]["requests"]["storage"] for m in (old.manifest, new.manifest))
            if quantity(now) < quantity(was):
                md = old.manifest["metadata"]
                message = f"would shrink claim {md['namespace']}/{md['name']} from {was} to {now}; claims only grow"
                losses.append(Loss(path, message, f"keep size {was} or larger", True))
        if changed and old.protect:
            message = f"changing {', '.join(changed)} replaces {what}: the new one starts empty"
            losses.append(Loss(path, message, _hint(teams, old.manifest, team_gone), True))
        elif changed:
            message = f"will REPLACE {what} (changing {', '.join(changed)}; protection was dropped earlier)"
            losses.append(Loss(path, message, "make sure its data is copied or no longer needed", False))
    return losses


def unprotected_now(plan: Plan, teams: Sequence[TeamConfig]) -> list[str]:
    """Notes for objects that hold data but are unprotected in this config (decommission/allowDataLoss)."""
    notes = []
    for obj in plan.objects:
        retain_class = obj.manifest["kind"] == "StorageClass" and obj.manifest.get("reclaimPolicy") == "Retain"
        if not obj.protect and (_holds_data(obj.manifest, False) or retain_class):
            path, _ = _team_path(teams, obj.manifest) if obj.manifest["kind"] != "StorageClass" else ("storage", None)
            notes.append(f"{path}: {_what(obj.manifest)} is NOT protected; removing it from the config deletes it")
    return notes
