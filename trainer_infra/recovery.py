"""`trainer-infra recover`: finish what an interrupted `pulumi up` left in the state (docs/recovery.md).

A killed engine leaves ``pending_operations`` in the stack's state and, on a DIY backend, its lock file. Pulumi
keeps a pending *create* until a person says what happened to it (``pulumi refresh --clear-pending-creates`` or an
interactive refresh; Pulumi 3.259, ``cmd/pulumi/operations/refresh.go``), and the Kubernetes provider (4.32)
refuses to create an object that already exists. So after clearing, each object whose create was in flight and
reached the API server is in the cluster but not in the state, and every later `up` fails on it with
``already exists``. The recovery is:

0. ``pulumi cancel``: the killed run's lock (a DIY backend's lock file; Pulumi Cloud's update in progress);
1. ``pulumi refresh --clear-pending-creates``: reads every recorded resource back (an interrupted update or
   delete becomes what the cluster holds) and drops the pending creates;
2. when creates were interrupted: one `up` with ``PULUMI_K8S_UPSERT_EXISTING_OBJECTS=true``, so the provider
   applies those objects server-side over what is there and records them; only if its preview deletes and
   replaces nothing: an upsert next to a delete is how a rename deletes the object it just adopted.

What this module decides is pure (the state export in, the steps out); ``cmd_recover`` runs them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: the provider reads it when its own config does not set ``upsertExistingObjects`` (provider.go, 4.32)
UPSERT_ENV = "PULUMI_K8S_UPSERT_EXISTING_OBJECTS"


@dataclass(frozen=True)
class Pending:
    """One operation the engine started and never saw end."""

    urn: str
    operation: str  # creating, updating, deleting, reading, importing
    kind: str
    namespace: str
    name: str

    @property
    def object(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}" if self.kind else self.urn.rsplit("::", 1)[-1]


@dataclass
class Recovery:
    """What to do with the pending operations of one state."""

    pending: list[Pending] = field(default_factory=list)
    #: URNs whose interrupted create the adopting `up` applies again
    adopt: list[str] = field(default_factory=list)
    #: why a pending create cannot be adopted safely (a person decides)
    refused: list[str] = field(default_factory=list)


def _object_key(resource: dict[str, Any]) -> tuple[str, str, str, str] | None:
    """(apiVersion, kind, namespace, name) of a Kubernetes object resource, else None."""
    if not str(resource.get("type", "")).startswith("kubernetes:"):
        return None
    inputs = resource.get("inputs") or {}
    meta = inputs.get("metadata") or {}
    if "kind" not in inputs or not isinstance(meta.get("name"), str):
        return None
    return str(inputs.get("apiVersion", "")), str(inputs["kind"]), str(meta.get("namespace") or ""), meta["name"]


def deployment_of(export: dict[str, Any]) -> dict[str, Any]:
    """The deployment of a ``pulumi stack export`` document (or the deployment itself)."""
    inner = export.get("deployment", export)
    return inner if isinstance(inner, dict) else {}


def pending_operations(deployment: dict[str, Any]) -> list[Pending]:
    found = []
    for op in deployment.get("pending_operations") or []:
        resource = op.get("resource") or {}
        key = _object_key(resource)
        _, kind, namespace, name = key or ("", "", "", "")
        found.append(Pending(str(resource.get("urn", "")), str(op.get("type", "")), kind, namespace, name))
    return found


def plan_recovery(deployment: dict[str, Any]) -> Recovery:
    """Adopt every interrupted create, unless the state already holds the same object under another URN: that is
    an interrupted rename, whose adoption would let the next `up` delete the object with the old resource."""
    recovery = Recovery(pending=pending_operations(deployment))
    held: dict[tuple[str, str, str, str], str] = {}
    for resource in deployment.get("resources") or []:
        key = _object_key(resource)
        if key is not None and not resource.get("delete"):
            held[key] = str(resource.get("urn", ""))
    creates = [op for op in deployment.get("pending_operations") or [] if op.get("type") == "creating"]
    for op in creates:
        resource = op.get("resource") or {}
        urn = str(resource.get("urn", ""))
        key = _object_key(resource)
        other = held.get(key) if key is not None else None
        if key is not None and other is not None and other != urn:
            recovery.refused.append(
                f"{urn}: the state already holds {key[1]} {key[2] + '/' if key[2] else ''}{key[3]} as {other} "
                "(an interrupted rename); give the new resource an alias to the old one, then `pulumi up`"
            )
        elif urn not in recovery.adopt:
            recovery.adopt.append(urn)
    return recovery


def describe(recovery: Recovery) -> list[str]:
    """One line per pending operation, as a person reads it."""
    return [f"interrupted while {p.operation}: {p.object} ({p.urn})" for p in recovery.pending]


def refresh_args(stack: str) -> list[str]:
    return ["refresh", "--clear-pending-creates", "--yes", "--skip-preview", "--non-interactive", "--stack", stack]


def destructive_steps(preview: dict[str, Any]) -> list[str]:
    """Steps of a ``pulumi preview --json`` that delete or replace something (a whole-stack adoption refuses them)."""
    risky = {"delete", "replace", "create-replacement", "delete-replaced", "discard", "discard-replaced"}
    return [f"{s.get('op')} {s.get('urn')}" for s in preview.get("steps") or [] if s.get("op") in risky]


# -- the command ---------------------------------------------------------------------------------------------------
Runner = Callable[[list[str], dict[str, str]], "subprocess.CompletedProcess[str]"]


def _run_pulumi(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``pulumi <args>``, its output shown as it comes; stdout also kept (for ``--json``)."""
    print(f"$ pulumi {' '.join(args)}", flush=True)
    capture = "--json" in args or args[:2] == ["stack", "export"]
    return subprocess.run(
        [os.environ.get("PULUMI", "pulumi"), *args],
        env={**os.environ, **env},
        stdout=subprocess.PIPE if capture else None,
        text=True,
        check=False,
    )


def add_recover_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stack", required=True, help="the Pulumi stack (as `pulumi --stack`)")
    p.add_argument("--yes", action="store_true", help="carry the recovery out (without: only report, exit 1)")
    p.add_argument(
        "--adopt-existing",
        action="store_true",
        help="after a run killed with PULUMI_SKIP_CHECKPOINTS=true (the state recorded nothing of it): the "
        "adopting `up` even without a pending create",
    )
    p.add_argument("up_args", nargs=argparse.REMAINDER, help="after `--`: passed to `pulumi up` (--policy-pack …)")


def cmd_recover(args: argparse.Namespace, run: Runner = _run_pulumi) -> int:
    up_args = [a for a in args.up_args if a != "--"]
    export = run(["stack", "export", "--stack", args.stack], {})
    if export.returncode != 0:
        print(f"trainer-infra recover: `pulumi stack export` exited {export.returncode}", file=sys.stderr)
        return 2
    recovery = plan_recovery(deployment_of(json.loads(export.stdout or "{}")))
    for line in describe(recovery):
        print(line)
    if recovery.refused:
        print("refused (decide by hand, docs/recovery.md):\n  " + "\n  ".join(recovery.refused), file=sys.stderr)
        return 2
    if not args.yes:
        if not recovery.pending:
            print(f"stack {args.stack}: no interrupted operation recorded")
            return 0
        print(f"stack {args.stack}: {len(recovery.pending)} interrupted operations; `--yes` recovers them")
        return 1
    # the killed run's lock, also when it was killed before any operation began: a DIY backend keeps its lock
    # file, Pulumi Cloud the update "in progress" (`cancel` fails when there is none: not an error here)
    run(["cancel", "--yes", "--non-interactive", "--stack", args.stack], {})
    if not recovery.pending and not args.adopt_existing:
        print(f"stack {args.stack}: no interrupted operation recorded")
        return 0
    if recovery.pending and run(refresh_args(args.stack), {}).returncode != 0:
        print("trainer-infra recover: the refresh failed; nothing else was changed", file=sys.stderr)
        return 2
    if recovery.adopt or args.adopt_existing:
        return _adopt(args.stack, up_args, run)
    print(f"stack {args.stack}: recovered; now run the deploy as usual (`pulumi up --refresh`)")
    return 0


def _adopt(stack: str, up_args: list[str], run: Runner) -> int:
    """The whole stack applied over what the cluster holds, only if nothing would be deleted or replaced."""
    env = {UPSERT_ENV: "true"}
    preview = run(["preview", "--json", "--non-interactive", "--stack", stack, *up_args], env)
    if preview.returncode != 0:
        print("trainer-infra recover: the preview failed; nothing was changed", file=sys.stderr)
        return 2
    risky = destructive_steps(json.loads(preview.stdout or "{}"))
    if risky:
        print("refused: the adopting `up` would delete or replace:\n  " + "\n  ".join(risky), file=sys.stderr)
        return 2
    if run(["up", "--yes", "--skip-preview", "--non-interactive", "--stack", stack, *up_args], env).returncode:
        print("trainer-infra recover: the adopting `up` failed", file=sys.stderr)
        return 2
    print(f"stack {stack}: adopted; now run the deploy as usual (`pulumi up --refresh`), which also drops {UPSERT_ENV}")
    return 0
