"""`trainer-infra sandbox controlplane up|down|status [--dir DIR]`: the control plane alone (no node, no root) for a
person at a terminal: `up` builds what is missing, starts it, detaches and records the PIDs; `down` stops them."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from trainer_infra.sandbox.build import Builder, BuildError
from trainer_infra.sandbox.controlplane import KUEUE_METRICS_CERT_DIR, Sandbox
from trainer_infra.sandbox.kube import ApiError
from trainer_infra.sandbox.processes import (
    Process,
    SandboxError,
    pid_matches,
    terminate,
)
from trainer_infra.sandbox.versions import cache_root


def default_dir() -> Path:
    """Where ``up`` keeps the sandbox (logs, kubeconfig, state)."""
    return cache_root() / "sandbox"


def _stop_from_state(workdir: Path) -> int:
    state_file = workdir / "state.json"
    if not state_file.exists():
        print(f"no sandbox state at {state_file}: nothing to stop")
        return 0
    state = json.loads(state_file.read_text())
    for entry in reversed(state["processes"]):
        proc = Process(entry["name"], entry["version"], Path(entry["binary"]), Path(entry["log"]), None, entry["pid"])
        if proc.alive():
            terminate(proc)
            print(f"stopped {proc.name} (pid {proc.pid})")
    if state.get("created_kueue_metrics_certs"):
        shutil.rmtree(KUEUE_METRICS_CERT_DIR.parent.parent, ignore_errors=True)
    state_file.unlink()
    return 0


def _status(workdir: Path) -> int:
    state_file = workdir / "state.json"
    if not state_file.exists():
        print(f"no sandbox running from {workdir}")
        return 1
    state = json.loads(state_file.read_text())
    ok = True
    for entry in state["processes"]:
        alive = pid_matches(entry["pid"], Path(entry["binary"]))
        ok &= alive
        print(f"{entry['name']:<28} v{entry['version']:<8} pid {entry['pid']:<8} {'running' if alive else 'DEAD'}")
    print(f"server: {state['server']}\nKUBECONFIG={state['kubeconfig']}")
    return 0 if ok else 1


def usage_text(sandbox: Sandbox) -> str:
    """How to point kubectl, KUBECONFIG and the kubeflow SDK at the sandbox."""
    return (
        f"Sandbox is up ({sandbox.versions.key}).\n"
        f"  API server : {sandbox.server}\n"
        f"  export KUBECONFIG={sandbox.kubeconfig}\n"
        f"  kubectl get nodes,clustertrainingruntimes,clusterqueues   # any kubectl works\n"
        f"  python -c 'from kubeflow.trainer import TrainerClient; print(TrainerClient().list_runtimes())'\n"
        f"  logs       : {sandbox.workdir / 'logs'}\n"
        f"  stop with  : trainer-infra sandbox controlplane down"
        + (f" --dir {sandbox.workdir}" if sandbox.workdir != default_dir() else "")
    )


def main(argv: list[str] | None = None) -> int:
    """CLI: up / down / status."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["up", "down", "status"])
    parser.add_argument("--dir", type=Path, default=default_dir(), help="sandbox directory (default: %(default)s)")
    parser.add_argument("--no-build", action="store_true", help="fail instead of building missing binaries")
    parser.add_argument("--stack", help="render this stack with trainer-infra and apply it (e.g. local)")
    parser.add_argument("--render-dir", type=Path, help="apply an existing `trainer-infra render` output directory")
    args = parser.parse_args(argv)
    workdir: Path = args.dir
    if args.command == "down":
        return _stop_from_state(workdir)
    if args.command == "status":
        return _status(workdir)
    if (workdir / "state.json").exists():
        _stop_from_state(workdir)
    from trainer_infra.sandbox.render import apply_render, kueue_settings, load_render, render_stack

    # Render first: the sandbox's Kueue takes the stack's scheduling settings. Not inside the
    # workdir, which start() wipes.
    render_dir: Path | None = args.render_dir
    settings: dict[str, Any] = {}
    releases: list[dict[str, Any]] | None = None
    try:
        if args.stack:
            render_dir = workdir.with_name(workdir.name + "-render")
            render_stack(args.stack, render_dir)
        if render_dir:
            rendered = load_render(render_dir)
            settings, releases = kueue_settings(rendered), rendered.helm_releases
    except RuntimeError as exc:
        print(f"sandbox failed: {exc}", file=sys.stderr)
        return 1
    # with a render: its charts' RBAC, and the controllers as their charts' ServiceAccounts
    sandbox = Sandbox(workdir, kueue_settings=settings, helm_releases=releases)
    try:
        if not args.no_build:
            Builder(sandbox.versions).build()
        sandbox.start()
        if render_dir:
            render = apply_render(sandbox, render_dir)
            print(f"applied {render_dir}/manifests.yaml ({len(render.objects)} objects)")
    except (SandboxError, BuildError, TimeoutError, ApiError, RuntimeError) as exc:
        sandbox.stop()
        print(f"sandbox failed: {exc}", file=sys.stderr)
        return 1
    state = json.loads(sandbox.state_file.read_text())
    state["created_kueue_metrics_certs"] = sandbox._created_kueue_metrics_certs
    sandbox.state_file.write_text(json.dumps(state, indent=2) + "\n")
    sandbox.detach()
    print(usage_text(sandbox))
    return 0


if __name__ == "__main__":
    sys.exit(main())
