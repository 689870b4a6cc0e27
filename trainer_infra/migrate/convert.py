"""One v1 job (plain dict) → one TrainJob (plain dict) for a stack, with every field accounted for.

Every node of the input is looked up in the field table (`mapping`); a field without an entry is an
unknown field (bad input), so a field can only be mapped, superseded, reported or refused — never lost
without a word. Replica types that become the same training nodes (PyTorch Master + Workers) must have
the same pod template: v2 runs one template on every node, so each difference is reported.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from packaging.version import Version

from trainer_infra.core.errors import did_you_mean, format_path
from trainer_infra.core.kueue import QUEUE_LABEL
from trainer_infra.manifests.runtime import ancestor, get_in, replicated_jobs
from trainer_infra.migrate import tenancy, validate
from trainer_infra.migrate.kinds import REPLICA_FIELDS, Kind, Role, find_kind, known_kinds
from trainer_infra.migrate.mapping import ENTRIES, PREFIXES, Disposition, Entry, entry_at, is_empty
from trainer_infra.migrate.select import Choice, NoRuntimeError, choose
from trainer_infra.migrate.source import Document, InputError
from trainer_infra.migrate.target import Target, Team

PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
SOURCE_ANNOTATION = "trainer-platform.io/migrated-from"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
PATCH_MANAGER = "trainer-platform.io/migrate"
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
V1_MANAGERS = ("kubeflow.org/training-operator", "kubeflow.org/mpi-operator")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# Pod-spec fields runtimePatches carries (Trainer 2.2 PodSpecPatch), with the first version that has them.
POD_PATCH_FIELDS = {
    "affinity": "2.2.0",
    "imagePullSecrets": "2.2.0",
    "nodeSelector": "2.2.0",
    "schedulingGates": "2.2.0",
    "securityContext": "2.2.0",
    "serviceAccountName": "2.2.0",
    "tolerations": "2.2.0",
    "volumes": "2.2.0",
    "terminationGracePeriodSeconds": "2.3.0",
}
CONTAINER_PATCH_FIELDS = ("volumeMounts", "securityContext")
TORCHRUN = ("torchrun", "torch.distributed.run", "torch.distributed.launch")

Path = tuple[str | int, ...]
POD = "spec.{replicas}.*.template"
# The types of the fields the converter reads (checked before it reads them: input is hostile). Keys are
# patterns, or the last segment of a pattern inside a replica's pod template.
EXPECTED: dict[str, type] = {
    "metadata": dict,
    "metadata.labels": dict,
    "metadata.annotations": dict,
    "spec": dict,
    "spec.runPolicy.activeDeadlineSeconds": int,
    "spec.runPolicy.suspend": bool,
    "spec.runPolicy.managedBy": str,
    "spec.runPolicy.schedulingPolicy.queue": str,
    "spec.runPolicy.schedulingPolicy.priorityClass": str,
    "spec.mainContainer": str,
    "spec.{replicas}.*.replicas": int,
    "containers": list,
    "containers[]": dict,
    "initContainers": list,
    "volumes": list,
    "volumes[]": dict,
    "image": str,
    "name": str,
    "command": list,
    "args": list,
    "env": list,
    "resources": dict,
    "ports": list,
    "ports[]": dict,
    "volumeMounts": list,
    "securityContext": dict,
    "nodeSelector": dict,
    "tolerations": list,
    "serviceAccountName": str,
    "labels": dict,
    "annotations": dict,
    "replicas": int,
    "hostNetwork": bool,
    "hostPID": bool,
    "hostIPC": bool,
}
TYPE_NAMES = {dict: "an object", list: "a list", str: "a string", int: "an integer", bool: "true or false"}


def _is(value: Any, expected: type) -> bool:
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, expected)


class Status:
    CLEAN = "clean"  # converts with nothing lost
    ALLOWED = "lossy, allowed"  # converts; --allow-lossy named every reported field
    NEEDS_FLAG = "needs --allow-lossy"
    REFUSED = "refused"  # the tenancy rules refuse it
    CANNOT = "cannot"  # bad input, or nothing in the stack to run it


@dataclass(frozen=True)
class Finding:
    path: str
    disposition: Disposition
    message: str
    allowed: bool = False


@dataclass(frozen=True)
class Options:
    runtime: str | None = None
    queue: str | None = None
    priority: str | None = None
    allow_lossy: tuple[str, ...] = ()
    namespace: str | None = None  # for documents without one
    namespace_map: dict[str, str] = field(default_factory=dict)


@dataclass
class Result:
    doc: Document
    kind: str = ""
    namespace: str = ""
    name: str = ""
    runtime: str = ""
    reason: str = ""
    trainjob: dict[str, Any] | None = None
    findings: list[Finding] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)
    refusal: str = ""

    @property
    def status(self) -> str:
        if self.errors:
            return Status.CANNOT
        if self.refusal:
            return Status.REFUSED
        lossy = [f for f in self.findings if f.disposition is Disposition.LOSSY]
        if any(not f.allowed for f in lossy):
            return Status.NEEDS_FLAG
        return Status.ALLOWED if lossy else Status.CLEAN

    def error(self, path: Path | str, message: str, hint: str = "") -> None:
        where = path if isinstance(path, str) else format_path(path)
        self.errors.append(InputError(self.doc.file, self.doc.index, self._prefix() + where, message, hint))

    def _prefix(self) -> str:
        return f"items[{self.doc.item}]." if self.doc.item is not None else ""


def pattern_of(path: Path) -> str:
    """`spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].image` →
    `spec.{replicas}.*.template.spec.containers[].image`."""
    out = ""
    for i, part in enumerate(path):
        if isinstance(part, int):
            out += "[]"
        elif i == 1 and path[0] == "spec" and part in REPLICA_FIELDS:
            out += ".{replicas}"
        elif i == 2 and path[0] == "spec" and path[1] in REPLICA_FIELDS:
            out += ".*"
        else:
            out += ("." if out else "") + str(part)
    return out


def allowed(name: str, path: str) -> bool:
    """`--allow-lossy` names a field by its path; `*` matches one segment, indices may be left out
    (`spec.*.Worker.template.spec.containers.envFrom`), and a prefix covers everything below it."""

    def segments(p: str) -> list[str]:
        return [s for s in re.sub(r"\[\d*\]", "", p).split(".") if s]

    want, have = segments(name), segments(path)
    return len(want) <= len(have) and all(w in ("*", h) for w, h in zip(want, have, strict=False))


def diff(a: Any, b: Any, path: Path) -> list[Path]:
    """Paths under which `b` differs from `a` (dicts by key, lists by index)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [p for k in sorted({*a, *b}, key=str) for p in diff(a.get(k), b.get(k), (*path, k))]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [p for i, (x, y) in enumerate(zip(a, b, strict=True)) for p in diff(x, y, (*path, i))]
    return [] if a == b else [path]


@dataclass
class _Replica:
    type: str
    role: Role
    path: Path
    spec: dict[str, Any]
    container: int  # index of the training container

    @property
    def pod(self) -> dict[str, Any]:
        pod: dict[str, Any] = get_in(self.spec, "template", "spec") or {}
        return pod

    @property
    def main(self) -> dict[str, Any]:
        main: dict[str, Any] = self.pod["containers"][self.container]
        return main

    @property
    def container_path(self) -> Path:
        return (*self.path, "template", "spec", "containers", self.container)


class _Converter:
    def __init__(self, doc: Document, target: Target, options: Options) -> None:
        self.doc, self.obj, self.target, self.opts = doc, doc.obj, target, options
        self.result = Result(doc)
        self.skip: set[Path] = set()
        self.source_namespace = ""

    # --- findings ---------------------------------------------------------------------------------

    def lossy(self, path: Path, message: str) -> None:
        where = format_path(path)
        ok = any(allowed(n, where) for n in self.opts.allow_lossy)
        self.result.findings.append(Finding(where, Disposition.LOSSY, message, ok))

    def note(self, path: Path, disposition: Disposition, message: str) -> None:
        self.result.findings.append(Finding(format_path(path), disposition, message))

    # --- the job ----------------------------------------------------------------------------------

    def run(self) -> Result:
        r = self.result
        kind = find_kind(str(self.obj.get("apiVersion", "")), str(self.obj.get("kind", "")))
        if kind is None:
            r.error(
                "kind",
                f"unknown kind {self.obj.get('apiVersion')} {self.obj.get('kind')}",
                f"migrate reads {', '.join(known_kinds())}",
            )
            return r
        r.kind = kind.label
        name = get_in(self.obj, "metadata", "name")
        if not isinstance(name, str) or not DNS_LABEL.match(name) or len(name) > 63:
            r.error("metadata.name", f"expected a DNS label (lowercase letters, digits, '-'; ≤63), found {name!r}")
            return r
        r.name = name
        team = self.team(r)
        if team is None or not isinstance(self.obj.get("spec"), dict):
            if team is not None:
                r.error("spec", "expected an object")
            return r
        replicas = self.replicas(kind)
        if r.errors or not replicas:
            return r
        primary = next((x for x in replicas if x.role is Role.TRAINER), None) or next(
            x for x in replicas if x.role is Role.SAME
        )
        nodes = next((x for x in replicas if x.role is Role.NODES), None)
        self.classify(kind, replicas, primary)
        if r.errors:
            return r
        try:
            launcher = primary.main if kind.framework == "mpi" else None
            choice = choose(self.target, team.namespace, kind, launcher, self.opts.runtime)
        except NoRuntimeError as exc:
            r.error("kind", exc.message, exc.hint)
            return r
        r.runtime, r.reason = choice.name, choice.reason
        self.check_tenancy(team, replicas)
        trainjob = self.build(kind, team, choice, replicas, primary, nodes)
        if not r.errors and not r.refusal:
            for where, message in validate.findings(trainjob, choice.runtime):
                r.error(f"(TrainJob) {where}", f"the Trainer API or webhook would refuse it: {message}")
        if r.status in (Status.CLEAN, Status.ALLOWED):
            r.trainjob = trainjob
        return r

    def team(self, r: Result) -> Team | None:
        source = get_in(self.obj, "metadata", "namespace") or self.opts.namespace
        if not source:
            r.error("metadata.namespace", "no namespace", "set it in the manifest or pass --namespace")
            return None
        namespace = self.opts.namespace_map.get(str(source), str(source))
        team = self.target.teams.get(namespace)
        if team is None:
            known = ", ".join(sorted(self.target.teams)) or "none"
            hint = did_you_mean(namespace, self.target.teams) or f"map it: --namespace-map {source}=<team namespace>"
            r.error(
                "metadata.namespace",
                f"{namespace!r} is not a team namespace of stack {self.target.stack} (team namespaces: {known})",
                hint,
            )
            return None
        r.namespace = namespace
        self.source_namespace = str(source)
        return team

    def replicas(self, kind: Kind) -> list[_Replica]:
        r = self.result
        base: Path = ("spec", kind.replicas_field)
        specs = get_in(self.obj, "spec", kind.replicas_field)
        if not isinstance(specs, dict) or not specs:
            r.error(base, "required: at least one replica spec", f"expected {', '.join(t for t, _ in kind.roles)}")
            return []
        out: list[_Replica] = []
        order = [t for t, _ in kind.roles]
        for rtype in sorted(specs, key=lambda t: order.index(t) if t in order else len(order)):
            spec, path = specs[rtype], (*base, str(rtype))
            role = kind.role(str(rtype))
            if role is None:
                r.error(
                    path,
                    f"unknown replica type {rtype!r} for {kind.kind}",
                    did_you_mean(str(rtype), order) or f"expected one of {', '.join(order)}",
                )
                continue
            if not isinstance(spec, dict):
                r.error(path, "expected an object")
                continue
            if role is Role.NONE:
                self.lossy(path, f"{rtype} replicas: v2 has no place for them (one kind of training node per job)")
                self.skip.add(path)
                continue
            containers = get_in(spec, "template", "spec", "containers")
            cpath = (*path, "template", "spec", "containers")
            if not isinstance(containers, list) or not containers or not all(isinstance(c, dict) for c in containers):
                r.error(cpath, "required: at least one container")
                continue
            index = self.main_container(kind, containers, cpath, report=role is not Role.SAME)
            if index is None:
                continue
            out.append(_Replica(str(rtype), role, path, spec, index))
        trainers = [x.type for x in out if x.role is Role.TRAINER]
        if len(trainers) > 1:
            r.error(base, f"{' and '.join(trainers)} both lead the job; v1 accepts only one")
        if out and not any(x.role in (Role.TRAINER, Role.SAME) for x in out):
            r.error(base, f"no replica type runs the training (expected {order[0]})")
        return [] if r.errors else out

    def main_container(self, kind: Kind, containers: list[dict[str, Any]], path: Path, report: bool) -> int | None:
        """The training container; the others are reported (not for SAME replicas: their template is
        compared with the trainer's as a whole)."""
        names = [c.get("name") for c in containers]
        wanted = get_in(self.obj, "spec", "mainContainer") or kind.container
        if wanted in names:
            index = names.index(wanted)
        elif len(containers) == 1:
            index = 0
        else:
            self.result.error(
                path,
                f"cannot tell the training container among {names}",
                f"name it {wanted!r}" if wanted else "set spec.mainContainer",
            )
            return None
        if not containers[index].get("image"):
            self.result.error((*path, index, "image"), "required: the training container's image")
            return None
        for i, c in enumerate(containers):
            if i != index and report:
                self.lossy(
                    (*path, i),
                    f"container {c.get('name')!r}: runtimePatches cannot add a container "
                    "to the runtime's pods (sidecars are not expressible)",
                )
                self.skip.add((*path, i))
        return index

    # --- field table ------------------------------------------------------------------------------

    def classify(self, kind: Kind, replicas: list[_Replica], primary: _Replica) -> None:
        for x in replicas:
            if x.role is Role.SAME:
                self.skip.add((*x.path, "template"))
                for p in diff(primary.spec.get("template"), x.spec.get("template"), (*x.path, "template")):
                    self.lossy(p, f"differs from {primary.type}: v2 runs one pod template on every training node")
        self.walk(self.obj, (), kind)

    def walk(self, value: Any, path: Path, kind: Kind) -> None:
        """Depth first; stops at the field table's entries (an entry covers its subtree)."""
        if path in self.skip:
            return
        if path:
            pattern = pattern_of(path)
            expected = EXPECTED.get(pattern.rsplit(".", 1)[-1] if pattern.startswith(POD) else pattern)
            if pattern in PREFIXES or pattern.startswith(POD):
                expected = expected or (dict if pattern in PREFIXES and not pattern.endswith("[]") else None)
            if expected is not None and value is not None and not _is(value, expected):
                self.result.error(path, f"expected {TYPE_NAMES[expected]}, found {type(value).__name__} {value!r:.60}")
                return
            entry = entry_at(pattern, kind.kind)
            if entry is not None:
                self.decide(entry, path, value, kind)
                return
            if pattern not in PREFIXES:
                parent = format_path(path[:-1]) or "the object"
                hint = did_you_mean(
                    str(path[-1]),
                    [
                        e.pattern.rsplit(".", 1)[-1]
                        for e in ENTRIES
                        if e.pattern.startswith(pattern_of(path[:-1]) + ".")
                    ],
                )
                self.result.error(path, f"unknown field of {parent} in {kind.label}", hint or "")
                return
        if isinstance(value, dict):
            for key in value:
                self.walk(value[key], (*path, str(key)), kind)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                self.walk(item, (*path, i), kind)

    def decide(self, entry: Entry, path: Path, value: Any, kind: Kind) -> None:
        d = entry.disposition
        if entry.pattern.endswith(".ports") and isinstance(value, list):
            for i, port in enumerate(value):
                default = (
                    kind.port is not None
                    and isinstance(port, dict)
                    and (port.get("name"), port.get("containerPort")) == kind.port
                )
                if not default:
                    self.lossy((*path, i), "only the framework's default port is superseded by the runtime's")
            if kind.port is not None and value:
                self.note(path, d, f"the framework's port {kind.port[0]}/{kind.port[1]}: the runtime sets its own")
            return
        if d is Disposition.OBSERVED:
            self.note(path, d, entry.why)
        elif d is Disposition.SUPERSEDED:
            if entry.keeps and not kept(entry, value):
                self.lossy(path, f"{value!r}: {entry.why}")
            else:
                self.note(path, d, f"superseded by {entry.target}" + (f": {entry.why}" if entry.why else ""))
        elif d is Disposition.LOSSY:
            if not kept(entry, value):
                self.lossy(path, entry.why)
        elif (
            d is Disposition.MAPPED
            and entry.since
            and not is_empty(value)
            and (Version(self.target.trainer_version) < Version(entry.since))
        ):
            self.lossy(path, f"{entry.why} (the stack runs Trainer {self.target.trainer_version})")
        # MAPPED fields are carried by build(); TENANCY fields by check_tenancy().

    # --- tenancy ----------------------------------------------------------------------------------

    def check_tenancy(self, team: Team, replicas: list[_Replica]) -> None:
        level = team.pod_security if team.pod_security != "privileged" else "baseline"
        ctx = tenancy.Context(
            self.source_namespace,
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
                self.result.findings.append(
                    Finding(f"{format_path(pod_path)}.{f.path}", Disposition.TENANCY, f"{f.reason}: {f.detail}")
                )
            if found:
                pod = f"{self.result.name}-{x.type.lower()}-0"
                messages.append(tenancy.admission_message(pod, found, ctx))
        self.result.refusal = "; ".join(messages)

    # --- the TrainJob -----------------------------------------------------------------------------

    def build(
        self,
        kind: Kind,
        team: Team,
        choice: Choice,
        replicas: list[_Replica],
        primary: _Replica,
        nodes: _Replica | None,
    ) -> dict[str, Any]:
        r, md = self.result, self.obj.get("metadata") or {}
        labels = {str(k): v for k, v in sorted((md.get("labels") or {}).items())}
        annotations = {str(k): v for k, v in sorted((md.get("annotations") or {}).items()) if k != LAST_APPLIED}
        if LAST_APPLIED in (md.get("annotations") or {}):
            self.note(("metadata", "annotations", LAST_APPLIED), Disposition.SUPERSEDED, "rewritten by kubectl")
        annotations[SOURCE_ANNOTATION] = f"{kind.api_version}/{kind.kind} {self.source_namespace}/{r.name}"
        labels.update(self.scheduling(team))
        trainer: dict[str, Any] = {}
        main, mpath = primary.main, primary.container_path
        for key in ("image", "command", "args", "env"):
            if key in main:
                trainer[key] = main[key]
        self.check_torchrun(choice, main, mpath)
        resources_from = nodes or primary
        if resources_from.main.get("resources"):
            trainer["resourcesPerNode"] = quoted(resources_from.main["resources"])
        trainer["numNodes"] = self.num_nodes(replicas)
        procs = self.num_procs(kind)
        if procs is not None:
            trainer["numProcPerNode"] = procs
        spec: dict[str, Any] = {
            "runtimeRef": {"name": choice.name, "kind": choice.kind, "apiGroup": "trainer.kubeflow.org"}
        }
        run = get_in(self.obj, "spec", "runPolicy") or {}
        if run.get("activeDeadlineSeconds") is not None:
            spec["activeDeadlineSeconds"] = run["activeDeadlineSeconds"]
        if run.get("suspend") is not None:
            spec["suspend"] = run["suspend"]
        self.managed_by(run, spec)
        spec["trainer"] = trainer
        if nodes is not None:
            self.compare_nodes(choice, primary, nodes)
        patches = self.patches(choice, primary, nodes)
        if patches:
            spec["runtimePatches"] = [
                {"manager": PATCH_MANAGER, "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": patches}}}}
            ]
        return {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {
                "name": r.name,
                "namespace": team.namespace,
                "labels": dict(sorted(labels.items())),
                "annotations": dict(sorted(annotations.items())),
            },
            "spec": spec,
        }

    def scheduling(self, team: Team) -> dict[str, str]:
        """The queue and priority labels: from the flag, schedulingPolicy or the label, checked against the stack."""
        policy = get_in(self.obj, "spec", "runPolicy", "schedulingPolicy") or {}
        labels = get_in(self.obj, "metadata", "labels") or {}
        out: dict[str, str] = {}
        for label, key, flag, known, what in (
            (QUEUE_LABEL, "queue", self.opts.queue, team.queues, f"LocalQueue in {team.namespace}"),
            (
                PRIORITY_LABEL,
                "priorityClass",
                self.opts.priority,
                self.target.priority_classes,
                "WorkloadPriorityClass",
            ),
        ):
            given = {v for v in (policy.get(key), labels.get(label)) if v}
            policy_path: Path = ("spec", "runPolicy", "schedulingPolicy", key)
            path: Path = policy_path if policy.get(key) else ("metadata", "labels", label)
            if flag:
                value, path = flag, ("--queue" if key == "queue" else "--priority",)
            elif len(given) > 1:
                self.result.error(policy_path, f"{policy.get(key)!r} disagrees with label {label}={labels.get(label)}")
                continue
            elif given:
                value = str(given.pop())
            elif key == "queue" and known:
                value = "default" if "default" in known else known[0]
                self.note(policy_path, Disposition.MAPPED, f"no queue named: the team's LocalQueue {value}")
            else:
                continue
            if value not in known:
                flag_name = "--queue" if key == "queue" else "--priority"
                have = ", ".join(known) or "none"
                hint = did_you_mean(value, known) or f"pick one with {flag_name} (the stack has: {have})"
                self.result.error(path, f"{value!r} is not a {what} of stack {self.target.stack}", hint)
                continue
            out[label] = value
        return out

    def check_torchrun(self, choice: Choice, main: dict[str, Any], path: Path) -> None:
        policy = (choice.runtime.get("spec") or {}).get("mlPolicy") or {}
        command = [str(c) for c in (main.get("command") or [])]
        if "torch" in policy and command and not any(t in " ".join(command[:3]) for t in TORCHRUN):
            self.lossy(
                (*path, "command"),
                "v2 starts torch jobs for torchrun (PET_* env); the v1 operator's "
                "MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE are not set: run the script under torchrun",
            )

    def num_nodes(self, replicas: list[_Replica]) -> int:
        nodes = [x for x in replicas if x.role is Role.NODES]
        counted = nodes or [x for x in replicas if x.role in (Role.TRAINER, Role.SAME)]
        total = 0
        for x in counted:
            n = x.spec.get("replicas", 1)
            if not isinstance(n, int) or isinstance(n, bool) or n < 0:
                self.result.error((*x.path, "replicas"), f"expected a non-negative integer, found {n!r}")
                continue
            total += n
        if nodes:
            if get_in(self.obj, "spec", "runLauncherAsWorker") is True:
                total += 1  # the v1 launcher already was a worker: it stays one of the training hosts
            self.note(
                (*nodes[0].path, "replicas"),
                Disposition.MAPPED,
                "numNodes = training hosts: the launcher runs as node 0 (runLauncherAsNode)",
            )
        return max(total, 1)

    def num_procs(self, kind: Kind) -> int | None:
        key = "nprocPerNode" if kind.kind == "PyTorchJob" else "slotsPerWorker" if kind.kind == "MPIJob" else None
        value = get_in(self.obj, "spec", key) if key else None
        if value is None:
            return None
        path: Path = ("spec", str(key))
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
        if isinstance(value, str) and value.isdigit() and int(value) > 0:
            return int(value)
        if value == "auto":
            self.note(path, Disposition.SUPERSEDED, "auto is the torch runtime's default")
            return None
        if value in ("gpu", "cpu"):
            self.lossy(path, f"{value!r}: numProcPerNode takes an integer (auto, the default, uses the GPUs)")
            return None
        self.result.error(path, f"expected a positive integer or auto, found {value!r}")
        return None

    def managed_by(self, run: dict[str, Any], spec: dict[str, Any]) -> None:
        value = run.get("managedBy")
        path: Path = ("spec", "runPolicy", "managedBy")
        if value == MULTIKUEUE:
            spec["managedBy"] = MULTIKUEUE
        elif value in V1_MANAGERS:
            self.note(path, Disposition.SUPERSEDED, "the Trainer controller manages TrainJobs")
        elif value:
            self.lossy(path, f"{value!r}: TrainJob accepts only the Trainer controller or {MULTIKUEUE}")

    def compare_nodes(self, choice: Choice, launcher: _Replica, nodes: _Replica) -> None:
        """MPI: the workers become the runtime's `node` job, which keeps the runtime's image and command
        (sshd) and shares the launcher's env and resources (runLauncherAsNode)."""
        job = next((j for j in replicated_jobs(choice.runtime) if j.get("name") == "node"), {})
        pod = get_in(job, "template", "spec", "template", "spec") or {}
        node_image = next((c.get("image") for c in pod.get("containers") or [] if c.get("name") == "node"), None)
        main, path = nodes.main, nodes.container_path
        if main.get("image") != node_image:
            self.lossy(
                (*path, "image"),
                f"the runtime's node pods run {node_image}; only the launcher takes spec.trainer.image",
            )
        for key in ("command", "args"):
            if key in main:
                self.note((*path, key), Disposition.SUPERSEDED, "the runtime's node job runs sshd")
        if (main.get("env") or []) != (launcher.main.get("env") or []):
            self.lossy((*path, "env"), "differs from the launcher's: spec.trainer.env goes to launcher and nodes")
        if launcher.main.get("resources") and launcher.main.get("resources") != main.get("resources"):
            self.lossy(
                (*launcher.container_path, "resources"),
                "the launcher runs as a node and gets the workers' resources (spec.trainer.resourcesPerNode)",
            )

    def patches(self, choice: Choice, primary: _Replica, nodes: _Replica | None) -> list[dict[str, Any]]:
        trainer_job = next((j.get("name") for j in replicated_jobs(choice.runtime) if ancestor(j) == "trainer"), "node")
        out = []
        for replica, job in ((primary, trainer_job), (nodes, "node")):
            if replica is None:
                continue
            patch = self.pod_patch(replica)
            if patch:
                out.append({"name": job, "template": {"spec": {"template": patch}}})
        return out

    def pod_patch(self, replica: _Replica) -> dict[str, Any]:
        pod, meta = replica.pod, get_in(replica.spec, "template", "metadata") or {}
        patch: dict[str, Any] = {}
        metadata = {k: meta[k] for k in ("labels", "annotations") if meta.get(k)}
        if metadata:
            patch["metadata"] = metadata
        spec = {}
        for key, since in POD_PATCH_FIELDS.items():
            if key in pod and not is_empty(pod[key]) and Version(self.target.trainer_version) >= Version(since):
                spec[key] = pod[key]
        container = {k: replica.main[k] for k in CONTAINER_PATCH_FIELDS if not is_empty(replica.main.get(k))}
        if container:
            spec["containers"] = [{"name": "node", **container}]
        if spec:
            patch["spec"] = spec
        return patch


def kept(entry: Entry, value: Any) -> bool:
    """Dropping `value` loses nothing: one of the entry's `keeps`, or empty where no default is declared."""
    if entry.keeps:
        return any(value == k and type(value) is type(k) for k in entry.keeps)
    return is_empty(value)


def quoted(resources: Any) -> Any:
    """Quantities as strings (`nvidia.com/gpu: "8"`): the kubeflow SDK misreads an unquoted GPU count."""
    if not isinstance(resources, dict):
        return resources
    return {
        k: ({r: str(q) for r, q in v.items()} if isinstance(v, dict) and k in ("limits", "requests") else v)
        for k, v in resources.items()
    }


def convert(doc: Document, target: Target, options: Options) -> Result:
    """Never raises on input: a malformed value the type checks above do not foresee is reported as bad input."""
    converter = _Converter(doc, target, options)
    try:
        return converter.run()
    except (TypeError, AttributeError, KeyError, ValueError, IndexError) as exc:
        result = Result(doc)
        result.error("", f"malformed job: a field has an unexpected type or value ({type(exc).__name__}: {exc})")
        return result
