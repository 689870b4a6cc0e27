"""`trainer-infra migrate`: the command line around the converter.

Exit codes: 0 every job converted (and was written); 1 some job needs `--allow-lossy` or is refused by the
tenancy rules (nothing written in file mode; the inventory writes the jobs that convert); 2 bad input
(file, document index and field path named) or an unusable stack, cluster or output directory.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import urllib3
from kubernetes import client, config
from kubernetes.config.config_exception import ConfigException

from trainer_infra.migrate import report
from trainer_infra.migrate.convert import convert
from trainer_infra.migrate.inventory import ClusterReadError, Lister, read_cluster
from trainer_infra.migrate.result import Options, Result, Status
from trainer_infra.migrate.source import Document, SourceError, read
from trainer_infra.migrate.target import Target

TargetLoader = Callable[[argparse.Namespace], Target]
ApiLoader = Callable[[argparse.Namespace], Lister]
OK, INCOMPLETE, BAD_INPUT = 0, 1, 2


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("inputs", nargs="*", metavar="FILE|DIR|-", help="v1 job manifests (YAML or JSON); - is stdin")
    p.add_argument(
        "--from-cluster",
        action="store_true",
        help="read the v1 jobs of the current kubeconfig context (read-only) and print an inventory",
    )
    p.add_argument("--context", help="--from-cluster: the kubeconfig context (default: the current one)")
    p.add_argument(
        "--namespace",
        "-n",
        action="append",
        default=[],
        metavar="N",
        help="--from-cluster: only these namespaces; files: the namespace of documents without one",
    )
    p.add_argument(
        "--namespace-map",
        action="append",
        default=[],
        metavar="OLD=NEW",
        help="move jobs of a v1 namespace into a team namespace (their claims cannot follow)",
    )
    p.add_argument("--runtime", help="use this runtime of the stack instead of the one picked by framework")
    p.add_argument("--queue", help="the team LocalQueue for every job (instead of schedulingPolicy.queue / label)")
    p.add_argument("--priority", help="the WorkloadPriorityClass for every job")
    p.add_argument(
        "--allow-lossy",
        action="append",
        default=[],
        metavar="FIELD",
        help="convert although FIELD (a reported path; * matches one segment) cannot be expressed",
    )
    p.add_argument("--out", metavar="DIR", help="write one file per TrainJob (DIR must not exist or be empty)")
    p.add_argument("--verbose", "-v", action="store_true", help="also print the superseded fields")


def _options(args: argparse.Namespace) -> Options:
    mapping = {}
    for item in args.namespace_map:
        old, sep, new = item.partition("=")
        if not sep or not old or not new:
            raise ValueError(f"--namespace-map {item!r}: expected OLD=NEW")
        mapping[old] = new
    names = [n for item in args.allow_lossy for n in item.split(",") if n]
    default_ns = args.namespace[0] if (args.namespace and not args.from_cluster) else None
    return Options(args.runtime, args.queue, args.priority, tuple(names), default_ns, mapping)


def _duplicates(results: list[Result]) -> None:
    seen: dict[tuple[str, str], Result] = {}
    for r in results:
        if r.trainjob is None:
            continue
        key = (r.namespace, r.name)
        if key in seen:
            r.trainjob = None
            r.error("metadata.name", f"a second job {r.namespace}/{r.name} (first: {seen[key].doc.where})")
        else:
            seen[key] = r


def run(args: argparse.Namespace, load_target: TargetLoader, load_api: ApiLoader) -> int:
    try:
        options = _options(args)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return BAD_INPUT
    if args.from_cluster == bool(args.inputs):
        print("error: give FILE|DIR|- or --from-cluster (one of them)", file=sys.stderr)
        return BAD_INPUT
    target = load_target(args)
    if args.from_cluster:
        try:
            docs, skipped = read_cluster(load_api(args), args.namespace)
        except (ClusterReadError, ConfigException, urllib3.exceptions.HTTPError) as exc:
            print(f"error: cannot read the cluster: {exc}", file=sys.stderr)
            return BAD_INPUT
        for s in skipped:
            print(f"note: {s.what}: {s.why}", file=sys.stderr)
    else:
        try:
            docs = read(args.inputs)
        except SourceError as exc:
            for e in exc.errors:
                print(f"error: {e.render()}", file=sys.stderr)
            return BAD_INPUT
    results = migrate(docs, target, options)
    for r in results:
        for line in report.job_report(r, args.verbose):
            print(line, file=sys.stderr)
    converted = [r.trainjob for r in results if r.trainjob is not None]
    if args.from_cluster:
        print("\n".join(report.inventory(results)))
        code = OK if len(converted) == len(results) else INCOMPLETE
    elif any(r.status == Status.CANNOT for r in results):
        return BAD_INPUT
    elif len(converted) != len(results):
        return INCOMPLETE
    else:
        code = OK
    if args.out:
        try:
            report.write_dir(Path(args.out), converted)
        except (OSError, report.OutputError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return BAD_INPUT
        print(f"wrote {len(converted)} TrainJob(s) to {args.out}", file=sys.stderr)
    elif not args.from_cluster:
        sys.stdout.write(report.dump(converted))
    return code


def cluster_api(args: argparse.Namespace) -> Lister:
    """The user's kubeconfig (KUBECONFIG or ~/.kube/config), current or named context; list calls only."""
    config.load_kube_config(context=args.context)
    api: Lister = client.CustomObjectsApi()
    return api


def migrate(docs: list[Document], target: Target, options: Options) -> list[Result]:
    results = [convert(d, target, options) for d in docs]
    _duplicates(results)
    return results
