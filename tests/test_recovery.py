"""`trainer-infra recover` (docs/recovery.md): what it does with the pending operations a killed `pulumi up` left.

The pulumi CLI is replaced by a recorder that answers with a state export shaped like the real one (the e2e,
``tests/e2e/test_pulumi_recovery.py``, runs the command against the real engine)."""

from __future__ import annotations

import argparse
import json
import subprocess
from typing import Any

import pytest

from trainer_infra.cli import main, parser
from trainer_infra.recovery import UPSERT_ENV, cmd_recover, plan_recovery

PREFIX = "urn:pulumi:prod::trainer-platform::trainer-platform:index:TrainingPlatform$"


def _resource(kind: str, name: str, namespace: str = "", urn_name: str = "") -> dict[str, Any]:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {
        "urn": f"{PREFIX}kubernetes:core/v1:{kind}::{urn_name or name}",
        "type": f"kubernetes:core/v1:{kind}",
        "inputs": {"apiVersion": "v1", "kind": kind, "metadata": meta},
    }


def _state(resources: list[dict[str, Any]], pending: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    ops = [{"resource": r, "type": t} for t, r in pending]
    return {"version": 3, "deployment": {"resources": resources, "pending_operations": ops}}


class Pulumi:
    """Records each call; answers `stack export` with ``state`` and `preview --json` with ``steps``."""

    def __init__(self, state: dict[str, Any], steps: list[dict[str, Any]] | None = None, fail: str = "") -> None:
        self.state, self.steps, self.fail = state, steps or [], fail
        self.calls: list[tuple[list[str], dict[str, str]]] = []

    def __call__(self, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        self.calls.append((args, env))
        out = ""
        if args[:2] == ["stack", "export"]:
            out = json.dumps(self.state)
        elif args[0] == "preview":
            out = json.dumps({"steps": self.steps})
        return subprocess.CompletedProcess(args, 1 if args[0] == self.fail else 0, out, "")

    def commands(self) -> list[str]:
        return [args[0] for args, _ in self.calls]


def _args(*argv: str) -> argparse.Namespace:
    return parser().parse_args(["recover", "--stack", "prod", *argv])


QUEUE = _resource("ConfigMap", "queue", "nlp")
CLAIM = _resource("PersistentVolumeClaim", "workspace", "nlp")


def test_nothing_pending_changes_nothing_but_a_left_lock(capsys: pytest.CaptureFixture[str]) -> None:
    """A run killed before its first operation leaves only its lock (a DIY backend's lock file)."""
    report = Pulumi(_state([QUEUE], []))
    assert cmd_recover(_args(), report) == 0
    assert report.commands() == ["stack"]
    assert "no interrupted operation" in capsys.readouterr().out
    pulumi = Pulumi(_state([QUEUE], []))
    assert cmd_recover(_args("--yes"), pulumi) == 0
    assert pulumi.commands() == ["stack", "cancel"]


def test_pending_operations_are_reported_and_refused_without_yes(capsys: pytest.CaptureFixture[str]) -> None:
    pulumi = Pulumi(_state([QUEUE], [("creating", CLAIM), ("updating", QUEUE)]))
    assert cmd_recover(_args(), pulumi) == 1
    assert pulumi.commands() == ["stack"]  # only read
    out = capsys.readouterr().out
    assert "interrupted while creating: PersistentVolumeClaim nlp/workspace" in out
    assert "interrupted while updating: ConfigMap nlp/queue" in out


def test_recovery_clears_then_applies_the_interrupted_creates_over_what_exists() -> None:
    pulumi = Pulumi(_state([QUEUE], [("creating", CLAIM), ("updating", QUEUE)]), steps=[{"op": "create"}])
    assert cmd_recover(_args("--yes", "--", "--policy-pack", "policy"), pulumi) == 0
    (cancel, _), (refresh, refresh_env), (preview, preview_env), (up, up_env) = pulumi.calls[1:]
    assert cancel[0] == "cancel"  # the killed run's lock
    assert refresh[0] == "refresh" and "--clear-pending-creates" in refresh and not refresh_env
    assert preview[0] == "preview" and up[0] == "up"
    assert preview_env == up_env == {UPSERT_ENV: "true"}
    assert up[-2:] == preview[-2:] == ["--policy-pack", "policy"]


def test_only_interrupted_updates_need_the_refresh_alone() -> None:
    pulumi = Pulumi(_state([QUEUE], [("updating", QUEUE)]))
    assert cmd_recover(_args("--yes"), pulumi) == 0
    assert pulumi.commands() == ["stack", "cancel", "refresh"]


def test_an_interrupted_rename_is_refused_before_anything_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """Adopting the object under its new URN would let the next `up` delete it together with the old resource."""
    renamed = _resource("PersistentVolumeClaim", "workspace", "nlp", urn_name="workspace-v2")
    pulumi = Pulumi(_state([CLAIM], [("creating", renamed)]))
    assert cmd_recover(_args("--yes"), pulumi) == 2
    assert pulumi.commands() == ["stack"]
    err = capsys.readouterr().err
    assert "interrupted rename" in err and CLAIM["urn"] in err and "alias" in err


def test_a_failed_refresh_stops_before_the_adopting_up() -> None:
    pulumi = Pulumi(_state([], [("creating", CLAIM)]), fail="refresh")
    assert cmd_recover(_args("--yes"), pulumi) == 2
    assert pulumi.commands() == ["stack", "cancel", "refresh"]


def test_the_adopting_up_is_refused_when_its_preview_deletes() -> None:
    """After a PULUMI_SKIP_CHECKPOINTS kill nothing is recorded (`--adopt-existing`): the whole stack is applied
    over the cluster, as after interrupted creates, but only when its preview neither deletes nor replaces."""
    deleting = Pulumi(_state([QUEUE], []), steps=[{"op": "create"}, {"op": "delete", "urn": QUEUE["urn"]}])
    assert cmd_recover(_args("--yes", "--adopt-existing"), deleting) == 2
    assert deleting.commands() == ["stack", "cancel", "preview"]
    clean = Pulumi(_state([QUEUE], []), steps=[{"op": "create"}, {"op": "same"}])
    assert cmd_recover(_args("--yes", "--adopt-existing"), clean) == 0
    assert clean.commands() == ["stack", "cancel", "preview", "up"]
    assert all(env == {UPSERT_ENV: "true"} for _, env in clean.calls[2:])


def test_plan_ignores_objects_being_deleted_when_looking_for_a_rename() -> None:
    """A resource pending deletion (``delete: true``) does not hold the object: the create is adopted."""
    old = {**_resource("PersistentVolumeClaim", "workspace", "nlp", urn_name="old"), "delete": True}
    recovery = plan_recovery(_state([old], [("creating", CLAIM)])["deployment"])
    assert recovery.adopt == [CLAIM["urn"]] and not recovery.refused


def test_the_command_is_wired_into_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["recover", "--help"])
    assert exited.value.code == 0
    assert "--adopt-existing" in capsys.readouterr().out
