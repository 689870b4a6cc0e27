"""`trainer-infra`: validate and render stacks offline (no Pulumi CLI, no cluster)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from trainer_infra.catalog.listing import render_table
from trainer_infra.catalog.loader import load_catalog
from trainer_infra.core.cloud import MissingSdkError, check_sdks, placeholder_outputs
from trainer_infra.core.errors import ConfigError, ConfigIssue
from trainer_infra.core.objects import Plan
from trainer_infra.diff import report
from trainer_infra.diff.compare import diff_renders
from trainer_infra.diff.git import DiffError, render_both, rendered_at, repo_root
from trainer_infra.fleet import stranded
from trainer_infra.migrate import command as migrate_command
from trainer_infra.migrate.target import Target, stack_target
from trainer_infra.program import deploy
from trainer_infra.queues.capacity import capacity_lines
from trainer_infra.recovery import add_recover_arguments, cmd_recover
from trainer_infra.render.capture import capture
from trainer_infra.render.enforce import enforce
from trainer_infra.render.output import Rendered, assemble, summary, write
from trainer_infra.render.per_cluster import render_fleet
from trainer_infra.sandbox import command as sandbox_command
from trainer_infra.simulate import command as simulate_command
from trainer_infra.simulate import compare as simulate_compare
from trainer_infra.simulate.facts import stack_facts
from trainer_infra.stack import shards
from trainer_infra.stack.build import build_plan
from trainer_infra.stack.config import StackConfig
from trainer_infra.stack.docs import reference_markdown
from trainer_infra.stack.fleet_plans import ValidatedFleet, build_fleet, is_fleet, validate_fleet
from trainer_infra.stack.load import NAMESPACE, read_file, stack_file
from trainer_infra.stack.validate import Validated, validate
from trainer_infra.tenancy import guard
from trainer_infra.versions import crd_storage_versions as storage_versions
from trainer_infra.versions.upgrade import check_upgrade, release_versions, versions_of_render


def default_stacks_dir() -> Path:
    here = Path.cwd() / "stacks"
    return here if here.is_dir() else Path(__file__).resolve().parents[1] / "stacks"


def _source(args: argparse.Namespace) -> tuple[Path, str]:
    if args.config_file:
        path = Path(args.config_file)
        return path, path.stem.removeprefix("Pulumi.")
    return stack_file(args.stack, Path(args.stacks_dir)), args.stack


def _load(args: argparse.Namespace) -> tuple[Validated, str]:
    """The stack file, validated once; every command works from this."""
    path, stack = _source(args)
    raw, issues = read_file(path)
    validated = validate(raw, str(path), issues)
    for w in validated.warnings:
        print(f"WARNING: {w}", file=sys.stderr)
    return validated, stack


def render_plan(plan: Plan, stack: str) -> Rendered:
    """The real program under mocks, fed the plan directly: what `pulumi up` would register."""
    check_sdks(plan.resources)
    return assemble(capture(lambda: deploy(plan), stack, placeholder_outputs(plan.resources)))


def _load_fleet(args: argparse.Namespace) -> tuple[ValidatedFleet, str] | None:
    """The stack as a fleet, or None for a single-cluster stack."""
    path, stack = _source(args)
    raw, issues = read_file(path)
    if not is_fleet(raw):
        return None
    if issues:
        raise ConfigError(issues, str(path))
    fleet = validate_fleet(raw, str(path))
    for w in fleet.warnings:
        print(f"WARNING: {w}", file=sys.stderr)
    return fleet, stack


def _fleet_command(args: argparse.Namespace, write_to: Path | None) -> int | None:
    """validate/render of a fleet stack: every cluster's plan, rendered in one program run, then
    reported and policy-checked per cluster (written to <out>/<cluster>/)."""
    loaded = _load_fleet(args)
    if loaded is None:
        return None
    fleet, stack = loaded
    started = time.perf_counter()
    renders = render_fleet(build_fleet(fleet), stack)
    worst = 0
    for cluster, rendered in renders.items():
        role = "manager" if cluster == fleet.fleet.manager_name else "worker"
        if write_to is not None:
            write(rendered, write_to / cluster)
        print(f"{role} {cluster}: {summary(rendered)}")
        worst = max(worst, enforce(rendered, fleet.config.allow_data_loss))
    where = f" to {write_to}/<cluster>/" if write_to is not None else ""
    print(f"fleet stack {stack}: {len(renders)} clusters valid{where} in {time.perf_counter() - started:.2f}s")
    return worst


def cmd_validate(args: argparse.Namespace) -> int:
    fleet = _fleet_command(args, None)
    if fleet is not None:
        return fleet
    if getattr(args, "base", None):
        path, _ = _source(args)
        try:
            with rendered_at(repo_root(Path.cwd()), path, args.base) as previous:
                label = f"the deployed {args.base}"
                again = {**vars(args), "base": None, "previous": previous, "previous_label": label}
                return _validate_single(argparse.Namespace(**again))
        except DiffError as exc:
            print(f"trainer-infra validate: {exc}", file=sys.stderr)
            return 2
    return _validate_single(args)


def _validate_single(args: argparse.Namespace) -> int:
    validated, stack = _load(args)
    plan = build_plan(validated)
    _check_previous(args, validated, plan)
    cfg = validated.config
    code = enforce(render_plan(plan, stack), cfg.allow_data_loss)
    if code:
        return code
    versions = ", ".join(f"{k} {v}" for k, v in plan.outputs["versions"].items())
    print(  # only once everything, the policy included, has passed
        f"stack {stack}: valid (Kubernetes {cfg.kubernetes.version}; {versions}; "
        f"{len(plan.objects)} objects, {len(plan.releases)} Helm releases)"
    )
    for line in capacity_lines(cfg.teams, cfg.queues, validated.queues):
        print(f"  {line}")
    return 0


def _check_previous(args: argparse.Namespace, validated: Validated, plan: Plan) -> None:
    """Explain what holds user data and is unprotected now; with --previous, refuse (exit 2) a change
    that would delete or replace protected data (trainer_infra/tenancy/guard.py) or upgrade a component
    along a path upstream says is unsafe (trainer_infra/versions/upgrade.py)."""
    teams = validated.config.teams
    for note in guard.unprotected_now(plan, teams):
        print(f"WARNING: {note}", file=sys.stderr)
    if not getattr(args, "previous", None):
        return
    previous_path = Path(args.previous)
    if previous_path.is_dir():
        previous = guard.from_render_dir(previous_path)
        deployed = versions_of_render(previous_path)
    else:
        raw, issues = read_file(previous_path)
        previous_plan = build_plan(validate(raw, str(previous_path), issues))
        previous = guard.from_plan(previous_plan)
        deployed = release_versions(previous_plan.releases)
    losses = guard.data_loss(previous, plan, teams)
    for loss in (x for x in losses if not x.refused):
        print(f"WARNING: {loss.render()}", file=sys.stderr)
    refused = [ConfigIssue(x.path, x.message, None, x.hint) for x in losses if x.refused]
    target = release_versions(plan.releases)
    upgrade = check_upgrade(deployed, target, allow_unsupported=validated.config.allow_unsupported_versions)
    for warning in upgrade.warnings:
        print(f"WARNING: {warning}", file=sys.stderr)
    refused += upgrade.refused
    if refused:
        raise ConfigError(refused, f"the change from {getattr(args, 'previous_label', None) or previous_path}")


def cmd_render(args: argparse.Namespace) -> int:
    fleet = _fleet_command(args, Path(args.out))
    if fleet is not None:
        return fleet
    validated, stack = _load(args)
    started = time.perf_counter()
    rendered = render_plan(build_plan(validated), stack)
    out = Path(args.out)
    write(rendered, out)
    print(f"rendered stack {stack} to {out}/ in {time.perf_counter() - started:.2f}s")
    print(summary(rendered))
    # A policy violation (exit 3) keeps the complete render: the files show what failed.
    return enforce(rendered, validated.config.allow_data_loss)


def cmd_diff(args: argparse.Namespace) -> int:
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


def _shards_at(root: Path, path: Path, ref: str) -> int:
    """teamShards of the stack file at a git ref (-1: no such file there, a new stack)."""
    try:
        relative = path.resolve().relative_to(root.resolve())
    except ValueError:
        return int(read_file(path)[0].get("teamShards") or 0)
    shown = subprocess.run(["git", "show", f"{ref}:{relative}"], cwd=root, capture_output=True, text=True)
    if shown.returncode != 0:
        return -1
    doc = yaml.safe_load(shown.stdout) or {}
    return int((doc.get("config") or {}).get(f"{NAMESPACE}:teamShards") or 0)


def cmd_shards(args: argparse.Namespace) -> int:
    """The stacks of a sharded stack in deploy order, or the `pulumi state move` commands of a migration."""
    validated, stack = _load(args)
    cfg = validated.config
    if args.affected_by:
        path = _source(args)[0]
        try:
            root = repo_root(Path.cwd())
            renders = render_both(root, path, args.affected_by)
            before = _shards_at(root, path, args.affected_by)
        except DiffError as exc:
            print(f"trainer-infra shards: {exc}", file=sys.stderr)
            return 2
        print("\n".join(shards.affected(renders.base, renders.head, stack, cfg.team_shards, before)))
        return 0
    if args.moves_from is not None:
        plan = build_plan(validated)
        for move in shards.moves(plan, cfg.teams, stack, args.project, args.moves_from, cfg.team_shards):
            print(move.command())
        return 0
    if not cfg.team_shards:
        if not args.names:
            print(f"stack {stack}: one stack (teamShards is not set)")
        return 0
    found = shards.layout(stack, cfg.team_shards, cfg.teams)
    for name, teams in zip(found.stacks()[1:], found.teams, strict=True):
        print(name if args.names else f"{name}: {len(teams)} teams ({', '.join(teams)})")
    return 0


def cmd_config_schema(_: argparse.Namespace) -> int:
    print(json.dumps(StackConfig.model_json_schema(by_alias=True), indent=2, sort_keys=True))
    return 0


def cmd_config_docs(_: argparse.Namespace) -> int:
    print(reference_markdown(), end="")
    return 0


def cmd_catalog_list(args: argparse.Namespace) -> int:
    if args.stack or args.config_file:
        validated = _load(args)[0]
        print(render_table(validated.catalog, validated.serve, validated.selection))
    else:
        print(render_table(load_catalog()))
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    def target(_: argparse.Namespace) -> Target:
        validated, stack = _load(args)
        return stack_target(stack, validated, build_plan(validated))

    return migrate_command.run(args, target, migrate_command.cluster_api)


def cmd_simulate(args: argparse.Namespace) -> int:
    validated, stack = _load(args)
    rendered = render_plan(build_plan(validated), stack)
    return simulate_command.cmd_simulate(args, stack_facts(rendered.manifests), rendered.releases, stack)


def _add_source(p: argparse.ArgumentParser) -> None:
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--stack", help="stack name: reads stacks/Pulumi.<NAME>.yaml")
    group.add_argument("--config-file", help="a file in the Pulumi stack format (config: {trainer-platform:…})")
    p.add_argument("--stacks-dir", default=str(default_stacks_dir()), help="where stack files live")


def _stack_command(sub: Any, name: str, help_: str, fn: Callable[[argparse.Namespace], int]) -> argparse.ArgumentParser:
    """A subcommand that reads one stack (`--stack` or `--config-file`)."""
    p: argparse.ArgumentParser = sub.add_parser(name, help=help_)
    _add_source(p)
    p.set_defaults(fn=fn)
    return p


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="trainer-infra", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    v = _stack_command(
        sub, "validate", "check a stack config and the policy; exit 2 (config) or 3 (policy)", cmd_validate
    )
    v.add_argument(
        "--previous",
        help="the deployed configuration (a render directory of the deployed commit, exact; or its stack file, "
        "whose unpinned versions take this checkout's defaults): refuse changes that would delete or replace "
        "protected team data, and unsafe upgrade paths (a downgrade, an unknown or skipped release)",
    )
    v.add_argument(
        "--base",
        help="a git ref of what is deployed (the PR base: merges to main deploy): its render, made with that "
        "commit's code, is the --previous",
    )
    r = _stack_command(sub, "render", "run the program under mocks and write every object it would create", cmd_render)
    r.add_argument("--out", required=True, help="output directory")
    df = _stack_command(
        sub,
        "diff",
        "render at a git ref and in the working tree and compare; exit 0 same, 1 changed, 2 error",
        cmd_diff,
    )
    df.add_argument("--base", required=True, help="git ref to compare against, e.g. origin/main")
    df.add_argument("--format", choices=("text", "markdown"), default="text")
    sh = _stack_command(
        sub,
        "shards",
        "with teamShards: the team stacks to run after the stack, in order (docs/large-organisations.md)",
        cmd_shards,
    )
    sh.add_argument("--names", action="store_true", help="only the team stacks' names, one a line (for scripts)")
    sh.add_argument(
        "--moves-from",
        type=int,
        metavar="N",
        help="print the `pulumi state move` commands that take the teams from N shards (0: the one stack) to "
        "teamShards, run before the first `up` with the new count",
    )
    sh.add_argument(
        "--affected-by",
        metavar="REF",
        help="the stacks (the platform's and team stacks) whose objects differ from the render at git REF, one a "
        "line in deploy order: what a pull request previews",
    )
    sh.add_argument("--project", default="trainer-platform", help="the Pulumi project name (Pulumi.yaml)")
    s = sub.add_parser("config-schema", help="print the JSON Schema of the stack config")
    s.set_defaults(fn=cmd_config_schema)
    d = sub.add_parser("config-docs", help="print docs/configuration.md (generated from the models)")
    d.set_defaults(fn=cmd_config_docs)
    c = sub.add_parser("catalog", help="the runtime catalog (runtimes/)")
    catalog_sub = c.add_subparsers(dest="catalog_command", required=True)
    cl = catalog_sub.add_parser("list", help="name, framework, version, Trainer, status, images; --stack: as served")
    source = cl.add_mutually_exclusive_group()
    source.add_argument("--stack", help="show what stacks/Pulumi.<NAME>.yaml serves")
    source.add_argument("--config-file", help="a file in the Pulumi stack format")
    cl.add_argument("--stacks-dir", default=str(default_stacks_dir()), help="where stack files live")
    cl.set_defaults(fn=cmd_catalog_list)
    m = _stack_command(
        sub,
        "migrate",
        "Training Operator v1 jobs → TrainJobs for the stack's catalog; exit 0 converted, 1 some job needs "
        "--allow-lossy or is refused, 2 bad input",
        cmd_migrate,
    )
    migrate_command.add_arguments(m)
    t = sub.add_parser("trace", help="workload traces for `simulate` (docs/simulate.md)")
    trace_sub = t.add_subparsers(dest="trace_command", required=True)
    tg = trace_sub.add_parser("generate", help="a seeded synthetic trace (heavy-tailed, bursty, unequal teams)")
    simulate_command.add_trace_arguments(tg)
    tg.set_defaults(fn=simulate_command.cmd_trace_generate)
    sim = _stack_command(
        sub,
        "simulate",
        "replay a workload trace on a throwaway control plane with the real Kueue (docs/simulate.md); "
        "exit 0 complete, 1 stopped early, 2 bad input",
        cmd_simulate,
    )
    simulate_command.add_simulate_arguments(sim)
    rec = sub.add_parser(
        "recover",
        help="finish an interrupted `pulumi up` (pending operations in the state; docs/recovery.md); "
        "exit 0 nothing pending or recovered, 1 pending (without --yes), 2 refused or failed",
    )
    add_recover_arguments(rec)
    rec.set_defaults(fn=cmd_recover)
    sv = sub.add_parser(
        "storage-versions",
        help="the components' CRDs whose status.storedVersions list more than the storage version; --migrate "
        "rewrites their objects and clears it (docs/versions.md); exit 0 clean, 1 an old version listed, 2 failed",
    )
    storage_versions.add_arguments(sv)
    sv.set_defaults(fn=storage_versions.cmd_storage_versions)
    fl = sub.add_parser("fleet", help="day-two commands for a MultiKueue fleet's manager (docs/fleet.md)")
    fleet_sub = fl.add_subparsers(dest="fleet_command", required=True)
    rd = fleet_sub.add_parser(
        "redispatch",
        help="dispatch again the TrainJobs a lost worker stranded on the manager (Kueue 0.19.2 does not); "
        "exit 0 none or all requeued, 1 a patch failed",
    )
    stranded.add_arguments(rd)
    rd.set_defaults(fn=stranded.cmd_redispatch)
    sd = sub.add_parser(
        "simulate-diff",
        help="per team, what changed between two simulate reports of the same trace (wait, share, utilisation); "
        "exit 1 when they are not comparable as they are",
    )
    simulate_compare.add_arguments(sd)
    sd.set_defaults(fn=simulate_compare.cmd_simulate_diff)
    sandbox_command.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["sandbox"]:  # its subcommands parse their own options
        return sandbox_command.main(argv[1:])
    args = parser().parse_args(argv)
    try:
        return int(args.fn(args))
    except ConfigError as exc:
        print(exc.render(), file=sys.stderr)
        return 2
    except MissingSdkError as exc:
        print(f"trainer-infra: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # `trainer-infra render … | head`: the reader went away; silence the flush at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:
        if os.environ.get("TRAINER_INFRA_DEBUG"):
            raise
        print(
            f"trainer-infra: internal error: {type(exc).__name__}: {exc}\n"
            "  this is a bug, not a problem in your stack file: please report it with the file "
            "(TRAINER_INFRA_DEBUG=1 shows the traceback)",
            file=sys.stderr,
        )
        return 1


def run() -> None:
    """The process entry point (`trainer-infra`, `python -m trainer_infra`): main, flush, and leave without
    interpreter finalization. The mock engine leaves asyncio loops and sockets behind; finalized in an
    arbitrary order at exit, a loop's `__del__` sometimes (about 1 run in 30) prints `Exception ignored in
    BaseEventLoop.__del__ … Invalid file descriptor: -1` after a successful run. Nothing is left to clean up
    that the OS does not: the output is flushed and every file written is closed."""
    code = main()
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    run()
