"""``trainer-infra sandbox …``: the platform on a laptop-sized machine, built from a checkout and the Go module proxy.

Each subcommand hands its remaining arguments to the module that does the work, whose ``--help`` explains it:
``build`` (the pinned binaries), ``toolchain`` (the Pulumi CLI and provider), ``runtime-images`` (the CPU stand-ins
of the runtimes' images), ``up``/``down`` (the real ``pulumi up`` of the local stack on a real node, root),
``first-job`` (a team member's first TrainJob on it), ``controlplane`` (the control plane alone, no root).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from typing import Any

#: subcommand → (module with a ``main(argv)``, leading arguments, help)
COMMANDS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "build": ("build", (), "build the pinned upstream binaries from the Go module proxy (needs Go; no root)"),
    "toolchain": ("toolchain", (), "build the pinned Pulumi CLI and Kubernetes provider (needs Go; no root)"),
    "runtime-images": ("runtime_images", (), "build the CPU stand-ins of the runtimes' images (needs mmdebstrap)"),
    "up": ("platform_sandbox", ("up",), "the real `pulumi up` of the local stack on a real node, left running (root)"),
    "down": ("platform_sandbox", ("down",), "stop what `up` started; fails naming anything left (root)"),
    "first-job": ("first_job", (), "a team member's first TrainJob on the sandbox `up` started"),
    "controlplane": ("controlplane_cli", (), "the control plane alone (up|down|status), no node, no root"),
}


def add_parser(sub: Any) -> None:
    """List ``sandbox`` and its subcommands in ``trainer-infra --help``; ``main`` parses them."""
    p = sub.add_parser(
        "sandbox", help="the platform on one machine from a checkout (docs/sandbox.md): " + ", ".join(COMMANDS)
    )
    p.add_argument(
        "sandbox_command", choices=list(COMMANDS), help="; ".join(f"{k}: {v[2]}" for k, v in COMMANDS.items())
    )
    p.add_argument("args", nargs=argparse.REMAINDER, help="passed on (`trainer-infra sandbox SUBCOMMAND --help`)")
    p.set_defaults(fn=lambda args: main([args.sandbox_command, *args.args]))


def main(argv: list[str]) -> int:
    """Dispatch ``SUBCOMMAND ARGS…`` to its module (its own parser: its options and ``--help`` pass through)."""
    if not argv or argv[0] not in COMMANDS:
        listing = "\n".join(f"  {name:<15} {help_}" for name, (_, _, help_) in COMMANDS.items())
        print(f"usage: trainer-infra sandbox SUBCOMMAND [ARGS…]\n{listing}")
        return 0 if argv[:1] in (["-h"], ["--help"]) else 2
    module, lead, _ = COMMANDS[argv[0]]
    run: Callable[[list[str]], int] = importlib.import_module(f"trainer_infra.sandbox.{module}").main
    sys.argv[0] = f"trainer-infra sandbox {argv[0]}"  # what the module's parser shows as its usage
    return int(run([*lead, *argv[1:]]))
