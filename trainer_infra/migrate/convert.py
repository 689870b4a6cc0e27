"""One v1 job (plain dict) → one TrainJob (plain dict) for a stack, with every field accounted for.

The steps, each in its module: read the replica specs (`replicas`), walk every field through the field table
(`fields`: a field can only be mapped, superseded, reported or refused — never lost without a word), choose the
runtime (`select`), check the tenancy rules (`tenancy`), build the TrainJob (`trainjob`) and check it against
the Trainer API (`validate`). Replica types that become the same training nodes (PyTorch Master + Workers) must
have the same pod template: v2 runs one template on every node, so each difference is reported.
"""

from __future__ import annotations

import re

from trainer_infra.core.errors import did_you_mean, format_path
from trainer_infra.manifests.runtime import get_in
from trainer_infra.migrate import tenancy, validate
from trainer_infra.migrate.fields import classify
from trainer_infra.migrate.kinds import Role, find_kind, known_kinds
from trainer_infra.migrate.mapping import Disposition
from trainer_infra.migrate.replicas import Replica, read_replicas
from trainer_infra.migrate.result import Conversion, Finding, Options, Result, Status
from trainer_infra.migrate.select import NoRuntimeError, choose
from trainer_infra.migrate.source import Document
from trainer_infra.migrate.target import Target, Team
from trainer_infra.migrate.trainjob import build_trainjob

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def _run(c: Conversion) -> Result:
    r = c.result
    kind = find_kind(str(c.obj.get("apiVersion", "")), str(c.obj.get("kind", "")))
    if kind is None:
        r.error(
            "kind",
            f"unknown kind {c.obj.get('apiVersion')} {c.obj.get('kind')}",
            f"migrate reads {', '.join(known_kinds())}",
        )
        return r
    r.kind = kind.label
    name = get_in(c.obj, "metadata", "name")
    if not isinstance(name, str) or not DNS_LABEL.match(name) or len(name) > 63:
        r.error("metadata.name", f"expected a DNS label (lowercase letters, digits, '-'; ≤63), found {name!r}")
        return r
    r.name = name
    team = _team(c, r)
    if team is None or not isinstance(c.obj.get("spec"), dict):
        if team is not None:
            r.error("spec", "expected an object")
        return r
    replicas = read_replicas(c, kind)
    if r.errors or not replicas:
        return r
    primary = next((x for x in replicas if x.role is Role.TRAINER), None) or next(
        x for x in replicas if x.role is Role.SAME
    )
    nodes = next((x for x in replicas if x.role is Role.NODES), None)
    classify(c, kind, replicas, primary)
    if r.errors:
        return r
    try:
        launcher = primary.main if kind.framework == "mpi" else None
        choice = choose(c.target, team.namespace, kind, launcher, c.opts.runtime)
    except NoRuntimeError as exc:
        r.error("kind", exc.message, exc.hint)
        return r
    r.runtime, r.reason = choice.name, choice.reason
    _check_tenancy(c, team, replicas)
    trainjob = build_trainjob(c, kind, team, choice, replicas, primary, nodes)
    if not r.errors and not r.refusal:
        for where, message in validate.findings(trainjob, choice.runtime):
            r.error(f"(TrainJob) {where}", f"the Trainer API or webhook would refuse it: {message}")
    if r.status in (Status.CLEAN, Status.ALLOWED):
        r.trainjob = trainjob
    return r


def _team(c: Conversion, r: Result) -> Team | None:
    source = get_in(c.obj, "metadata", "namespace") or c.opts.namespace
    if not source:
        r.error("metadata.namespace", "no namespace", "set it in the manifest or pass --namespace")
        return None
    namespace = c.opts.namespace_map.get(str(source), str(source))
    team = c.target.teams.get(namespace)
    if team is None:
        known = ", ".join(sorted(c.target.teams)) or "none"
        hint = did_you_mean(namespace, c.target.teams) or f"map it: --namespace-map {source}=<team namespace>"
        r.error(
            "metadata.namespace",
            f"{namespace!r} is not a team namespace of stack {c.target.stack} (team namespaces: {known})",
            hint,
        )
        return None
    r.namespace = namespace
    c.source_namespace = str(source)
    return team


def _check_tenancy(c: Conversion, team: Team, replicas: list[Replica]) -> None:
    level = team.pod_security if team.pod_security != "privileged" else "baseline"
    ctx = tenancy.Context(
        c.source_namespace,
        team.namespace,
        f"{level}:{team.pod_security_version}",
        team.claims,
        team.service_accounts,
    )
    messages = []
    for x in replicas:
        found = tenancy.refusals(x.pod, ctx)
        for f in found:
            pod_path = (*x.path, "template", "spec")
            c.result.findings.append(
                Finding(f"{format_path(pod_path)}.{f.path}", Disposition.TENANCY, f"{f.reason}: {f.detail}")
            )
        if found:
            pod = f"{c.result.name}-{x.type.lower()}-0"
            messages.append(tenancy.admission_message(pod, found, ctx))
    c.result.refusal = "; ".join(messages)


# --- the TrainJob -----------------------------------------------------------------------------


def convert(doc: Document, target: Target, options: Options) -> Result:
    """Never raises on input: a malformed value the type checks do not foresee is reported as bad input."""
    try:
        return _run(Conversion(doc, target, options))
    except (TypeError, AttributeError, KeyError, ValueError, IndexError) as exc:
        result = Result(doc)
        result.error("", f"malformed job: a field has an unexpected type or value ({type(exc).__name__}: {exc})")
        return result
