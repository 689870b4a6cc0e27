"""What the Pulumi e2e files read from a `pulumi` run: the object a preview step touches, and each step's time
(kept in the cache so the numbers survive the run for the notes)."""

from __future__ import annotations

import json
import time
from typing import Any

from trainer_infra.sandbox.pulumi_stack import Result
from trainer_infra.sandbox.versions import cache_root


def kind_name(step: dict[str, Any]) -> tuple[str, str, str]:
    """(kind, namespace, name) of the Kubernetes object a preview step creates, changes or deletes."""
    state = step.get("newState") or step.get("oldState") or {}
    inputs = state.get("inputs") or {}
    meta = inputs.get("metadata") or {}
    return str(inputs.get("kind", "")), str(meta.get("namespace", "")), str(meta.get("name", ""))


def record_timing(name: str, result: Result) -> None:
    """Print the step's time and append it to the cache's history, so numbers survive the run for notes."""
    record = cache_root() / "toolchain" / "e2e-timings.json"
    record.parent.mkdir(parents=True, exist_ok=True)
    history = json.loads(record.read_text()) if record.exists() else []
    history.append({"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "step": name, "seconds": result.seconds})
    record.write_text(json.dumps(history, indent=2) + "\n")
    print(f"[e2e] {name}: {result.seconds} s", flush=True)
