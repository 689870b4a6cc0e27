"""`trainer-infra`: validate and render stacks offline (no Pulumi CLI, no cluster)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from trainer_infra.config.loader import LoadedConfig, load_file, raw_from_stack_document, stack_file
from trainer_infra.config.stack import StackConfig
from trainer_infra.errors import ConfigError


def default_stacks_dir() -> Path:
    here = Path.cwd() / "stacks"
    return here if here.is_dir() else Path(__file__).resolve().parents[1] / "stacks"


def _source(args: argparse.Namespace) -> tuple[Path, str]:
    if args.config_file:
        path = Path(args.config_file)
        return path, path.stem.removeprefix("Pulumi.")
    return stack_file(args.stack, Path(args.stacks_dir)), args.stack


def _load(args: argparse.Namespace) -> tuple[LoadedConfig, dict[str, Any], str]:
    path, stack = _source(args)
    loaded = load_file(path)
    raw = raw_from_stack_document(yaml.safe_load(path.read_text()), str(path))
    return loaded, raw, stack


def cmd_validate(args: argparse.Namespace) -> int:
    loaded, _, stack = _load(args)
    from trainer_infra.plan.build import build_plan

    plan = build_plan(loaded.config)
    for w in loaded.warnings:
        print(f"WARNING: {w}", file=sys.stderr)
    versions = ", ".join(f"{k} {v}" for k, v in plan.outputs["versions"].items())
    print(
        f"stack {stack}: valid (Kubernetes {loaded.config.kubernetes.version}; {versions}; "
        f"{len(plan.objects)} objects, {len(plan.releases)} Helm releases)"
    )
    from trainer_infra.queues.capacity import capacity_lines

    for line in capacity_lines(loaded.config):
        print(f"  {line}")
    return 0


def cmd_render(args: argparse.Namespace) -> int:
    from trainer_infra.render.capture import capture
    from trainer_infra.render.output import assemble, summary, write

    loaded, raw, stack = _load(args)
    for w in loaded.warnings:
        print(f"WARNING: {w}", file=sys.stderr)
    started = time.perf_counter()
    rendered = assemble(capture(raw, stack))
    out = Path(args.out)
    write(rendered, out)
    print(f"rendered stack {stack} to {out}/ in {time.perf_counter() - started:.2f}s")
    print(summary(rendered))
    return 0


def cmd_config_schema(_: argparse.Namespace) -> int:
    print(json.dumps(StackConfig.model_json_schema(by_alias=True), indent=2, sort_keys=True))
    return 0


def cmd_config_docs(_: argparse.Namespace) -> int:
    from trainer_infra.config.docs import reference_markdown

    print(reference_markdown(), end="")
    return 0


def _add_source(p: argparse.ArgumentParser) -> None:
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--stack", help="stack name: reads stacks/Pulumi.<NAME>.yaml")
    group.add_argument("--config-file", help="a file in the Pulumi stack format (config: {trainer-platform:…})")
    p.add_argument("--stacks-dir", default=str(default_stacks_dir()), help="where stack files live")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="trainer-infra", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    v = sub.add_parser("validate", help="check a stack config; exit 2 with every error")
    _add_source(v)
    v.set_defaults(fn=cmd_validate)
    r = sub.add_parser("render", help="run the program under mocks and write every object it would create")
    _add_source(r)
    r.add_argument("--out", required=True, help="output directory")
    r.set_defaults(fn=cmd_render)
    s = sub.add_parser("config-schema", help="print the JSON Schema of the stack config")
    s.set_defaults(fn=cmd_config_schema)
    d = sub.add_parser("config-docs", help="print the configuration reference (README section) as Markdown")
    d.set_defaults(fn=cmd_config_docs)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except ConfigError as exc:
        print(exc.render(), file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
