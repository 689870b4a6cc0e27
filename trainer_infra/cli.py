"""`trainer-infra`: validate and render stacks offline (no Pulumi CLI, no cluster)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from trainer_infra.config.loader import LoadedConfig, load_file, raw_from_stack_document, stack_file
from trainer_infra.config.stack import StackConfig
from trainer_infra.errors import ConfigError, ConfigIssue


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
    from trainer_infra.policies.offline import enforce
    from trainer_infra.program import run
    from trainer_infra.render.capture import capture
    from trainer_infra.render.output import assemble

    plan = build_plan(loaded.config)
    for w in loaded.warnings:
        print(f"WARNING: {w}", file=sys.stderr)
    _check_data_loss(args, loaded, plan)
    versions = ", ".join(f"{k} {v}" for k, v in plan.outputs["versions"].items())
    print(
        f"stack {stack}: valid (Kubernetes {loaded.config.kubernetes.version}; {versions}; "
        f"{len(plan.objects)} objects, {len(plan.releases)} Helm releases)"
    )
    from trainer_infra.queues.capacity import capacity_lines

    for line in capacity_lines(loaded.config):
        print(f"  {line}")
    return enforce(assemble(capture(lambda: run(loaded), stack)), loaded.config.allow_data_loss)


def _check_data_loss(args: argparse.Namespace, loaded: LoadedConfig, plan: Any) -> None:
    """Explain what holds user data and is unprotected now; with --previous, refuse (exit 2) a change
    that would delete or replace protected data (trainer_infra/tenancy/guard.py)."""
    from trainer_infra.tenancy import guard

    for note in guard.unprotected_now(plan, loaded.config):
        print(f"WARNING: {note}", file=sys.stderr)
    if not getattr(args, "previous", None):
        return
    previous_path = Path(args.previous)
    if previous_path.is_dir():
        previous = guard.from_render_dir(previous_path)
    else:
        from trainer_infra.plan.build import build_plan

        previous = guard.from_plan(build_plan(load_file(previous_path).config))
    losses = guard.data_loss(previous, plan, loaded.config)
    for loss in (x for x in losses if not x.refused):
        print(f"WARNING: {loss.render()}", file=sys.stderr)
    refused = [ConfigIssue(x.path, x.message, None, x.hint) for x in losses if x.refused]
    if refused:
        raise ConfigError(refused, f"the change from {previous_path}")


def cmd_render(args: argparse.Namespace) -> int:
    from trainer_infra.policies.offline import enforce
    from trainer_infra.program import run
    from trainer_infra.render.capture import capture
    from trainer_infra.render.output import assemble, summary, write

    loaded, _, stack = _load(args)
    for w in loaded.warnings:
        print(f"WARNING: {w}", file=sys.stderr)
    started = time.perf_counter()
    rendered = assemble(capture(lambda: run(loaded), stack))
    out = Path(args.out)
    write(rendered, out)
    print(f"rendered stack {stack} to {out}/ in {time.perf_counter() - started:.2f}s")
    print(summary(rendered))
    return enforce(rendered, loaded.config.allow_data_loss)  # files stay written: look at what failed


def cmd_diff(args: argparse.Namespace) -> int:
    from trainer_infra.diff import report
    from trainer_infra.diff.compare import diff_renders
    from trainer_infra.diff.git import DiffError, render_both, repo_root

    path, stack = _source(args)
    if not path.exists():
        raise ConfigError([ConfigIssue("", f"no such stack file {path}")], str(path))
    try:
        root = repo_root(Path.cwd())
        renders = render_both(root, path, args.base)
    except DiffError as exc:
        print(f"trainer-infra diff: {exc}", file=sys.stderr)
        return 2
    diff = diff_renders(renders.base, renders.head)
    new = "" if renders.base_has_stack else ", new stack"
    title = f"trainer-infra diff: stack `{stack}` ({args.base} `{renders.base_commit[:10]}` → working tree{new})"
    fmt = report.markdown if args.format == "markdown" else report.text
    print(fmt(diff, title), end="")
    return 1 if diff.changed else 0


def cmd_config_schema(_: argparse.Namespace) -> int:
    print(json.dumps(StackConfig.model_json_schema(by_alias=True), indent=2, sort_keys=True))
    return 0


def cmd_config_docs(_: argparse.Namespace) -> int:
    from trainer_infra.config.docs import reference_markdown

    print(reference_markdown(), end="")
    return 0


def cmd_catalog_list(args: argparse.Namespace) -> int:
    from trainer_infra.catalog.listing import render_table
    from trainer_infra.catalog.loader import load_catalog

    catalog = load_catalog()
    cfg = _load(args)[0].config if (args.stack or args.config_file) else None
    print(render_table(catalog, cfg))
    return 0


def _add_source(p: argparse.ArgumentParser) -> None:
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--stack", help="stack name: reads stacks/Pulumi.<NAME>.yaml")
    group.add_argument("--config-file", help="a file in the Pulumi stack format (config: {trainer-platform:…})")
    p.add_argument("--stacks-dir", default=str(default_stacks_dir()), help="where stack files live")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="trainer-infra", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    v = sub.add_parser("validate", help="check a stack config and the policy; exit 2 (config) or 3 (policy)")
    _add_source(v)
    v.add_argument(
        "--previous",
        help="the previous deployment (a render directory or stack file): refuse changes that would "
        "delete or replace protected team data",
    )
    v.set_defaults(fn=cmd_validate)
    r = sub.add_parser("render", help="run the program under mocks and write every object it would create")
    _add_source(r)
    r.add_argument("--out", required=True, help="output directory")
    r.set_defaults(fn=cmd_render)
    df = sub.add_parser(
        "diff", help="render at a git ref and in the working tree and compare; exit 0 same, 1 changed, 2 error"
    )
    _add_source(df)
    df.add_argument("--base", required=True, help="git ref to compare against, e.g. origin/main")
    df.add_argument("--format", choices=("text", "markdown"), default="text")
    df.set_defaults(fn=cmd_diff)
    s = sub.add_parser("config-schema", help="print the JSON Schema of the stack config")
    s.set_defaults(fn=cmd_config_schema)
    d = sub.add_parser("config-docs", help="print the configuration reference (README section) as Markdown")
    d.set_defaults(fn=cmd_config_docs)
    c = sub.add_parser("catalog", help="the runtime catalog (runtimes/)")
    catalog_sub = c.add_subparsers(dest="catalog_command", required=True)
    cl = catalog_sub.add_parser("list", help="name, framework, version, Trainer, status, images; --stack: as served")
    source = cl.add_mutually_exclusive_group()
    source.add_argument("--stack", help="show what stacks/Pulumi.<NAME>.yaml serves")
    source.add_argument("--config-file", help="a file in the Pulumi stack format")
    cl.add_argument("--stacks-dir", default=str(default_stacks_dir()), help="where stack files live")
    cl.set_defaults(fn=cmd_catalog_list)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except ConfigError as exc:
        print(exc.render(), file=sys.stderr)
        return 2
    except BrokenPipeError:
        # `trainer-infra render … | head`: the reader went away; silence the flush at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
