"""The platform's own admission layer for team namespaces: ValidatingAdmissionPolicies (GA in Kubernetes 1.30),
rendered here, enforced by the API server, no controller to run.

A team member is hostile input. What they control reaches pods through TrainJobs (`runtimePatches`),
TrainingRuntimes (`manageRuntimes`), and from there JobSets and Pods; each kind gets a policy with the rules
of `manifests/pod_rules.py` that its schema can express. A TrainJob or TrainingRuntime is refused at create,
with the reason, before anything is half-created; the JobSet and Pod policies are the backstop for any other
route. TrainJobs must also name one of the team's LocalQueues (otherwise Kueue never sees them: no quota),
and only Kueue may lift `spec.suspend` (otherwise a member starts pods Kueue did not admit).

Scope: namespaces labelled with the team label (members cannot label namespaces). Per-team allow-lists are
annotations on the team namespace (`namespace_annotations`), read through `namespaceObject`: members cannot
edit namespaces, there is no parameter object that could be missing, and each policy keeps the same size
whatever the number of teams. (A CEL map literal of every team passed the API server's 100,000-character
expression limit at about 590 teams: `make bench-pulumi` failed at 1,000.)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from trainer_infra.core.kueue import QUEUE_LABEL
from trainer_infra.manifests import meta
from trainer_infra.manifests.pod_rules import (
    CLAIM_BINDING_FIELDS,
    DEFAULT_SERVICE_ACCOUNT,
    HOST_NAMESPACES,
    SAFE_VOLUME_KINDS,
    UNSAFE_VOLUME_KINDS,
)

API = "admissionregistration.k8s.io/v1"
PREFIX = "trainer-platform-tenancy"
#: the team namespace's annotations that hold its allow-lists (comma-separated names), by `variables.team` key
ALLOW_LISTS = {
    "claims": "admission.trainer-platform.io/claims",
    "queues": "admission.trainer-platform.io/queues",
    "serviceAccounts": "admission.trainer-platform.io/service-accounts",
}


@dataclass(frozen=True)
class TeamAdmission:
    """What one team namespace may reference."""

    namespace: str
    claims: tuple[str, ...]
    queues: tuple[str, ...]
    service_accounts: tuple[str, ...] = ()


@dataclass(frozen=True)
class AdmissionSettings:
    """Everything the policies need, resolved by the planner (identities from the charts' release names)."""

    teams: tuple[TeamAdmission, ...]
    trainer_identity: str
    kueue_identity: str | None  # None: Kueue does not manage TrainJobs (no queue or suspend rule)
    priority_classes: tuple[str, ...] = ()
    data_cache_service_account: str | None = None


def _lit(value: Any) -> str:
    """A CEL literal (JSON strings, lists and maps are valid CEL)."""
    return json.dumps(value, sort_keys=True)


def _flag(expr: str) -> str:
    """`expr` is set and true (absent booleans are false)."""
    parent, _, field = expr.rpartition(".")
    return f"(has({parent}.{field}) && {parent}.{field})"


# -- rules on one pod spec `s` ----------------------------------------------------------------------


def _volumes_safe(_: AdmissionSettings) -> str:
    unsafe = " || ".join(f"has(v.{k})" for k in UNSAFE_VOLUME_KINDS)
    return f"!has(s.volumes) || s.volumes.all(v, !({unsafe}))"


def _own_claims(_: AdmissionSettings) -> str:
    return (
        "!has(s.volumes) || s.volumes.all(v, !has(v.persistentVolumeClaim) || "
        "v.persistentVolumeClaim.claimName in variables.team.claims)"
    )


def _no_host_namespaces(_: AdmissionSettings) -> str:
    return " && ".join(f"!{_flag('s.' + f)}" for f in HOST_NAMESPACES)


def _container_security(fields: Sequence[str]) -> Callable[[AdmissionSettings], str]:
    def rule(_: AdmissionSettings) -> str:
        sc = "c.securityContext"
        bad = (
            f"{_flag(sc + '.privileged')} || "
            f"(has({sc}.capabilities) && has({sc}.capabilities.add) && size({sc}.capabilities.add) > 0) || "
            f"(has({sc}.windowsOptions) && {_flag(sc + '.windowsOptions.hostProcess')})"
        )
        per_field = [f"(!has(s.{f}) || s.{f}.all(c, !has({sc}) || !({bad})))" for f in fields]
        windows = "s.securityContext.windowsOptions"
        pod_level = f"!(has(s.securityContext) && has({windows}) && {_flag(windows + '.hostProcess')})"
        return " && ".join([*per_field, pod_level])

    return rule


def _no_host_ports(_: AdmissionSettings) -> str:
    return " && ".join(
        f"(!has(s.{f}) || s.{f}.all(c, !has(c.ports) || c.ports.all(p, !has(p.hostPort) || p.hostPort == 0)))"
        for f in ("initContainers", "containers")
    )


def _no_node_name(_: AdmissionSettings) -> str:
    return "!has(s.nodeName) || s.nodeName == ''"


def _service_accounts(fields: Sequence[str], wide: bool) -> Callable[[AdmissionSettings], str]:
    def rule(settings: AdmissionSettings) -> str:
        extra = [settings.data_cache_service_account] if wide and settings.data_cache_service_account else []
        allowed = f"(variables.team.serviceAccounts + {_lit(sorted(extra))})"
        return " && ".join(f"(!has(s.{f}) || s.{f} == '' || s.{f} in {allowed})" for f in fields)

    return rule


def _priority_classes(settings: AdmissionSettings) -> str:
    allowed = _lit(sorted(settings.priority_classes))
    return f"!has(s.priorityClassName) || s.priorityClassName == '' || s.priorityClassName in {allowed}"


@dataclass(frozen=True)
class Rule:
    """One check on every pod spec of the object, and what a data scientist is told when it fails."""

    name: str
    build: Callable[[AdmissionSettings], str]
    message: str


def _rules(kind: str) -> list[Rule]:
    volumes = Rule(
        "volumes",
        _volumes_safe,
        "mounts a volume of a kind team namespaces may not use (nfs, csi, hostPath, iscsi, ...). Mount your "
        f"team's claims ({{claims}}) or {', '.join(SAFE_VOLUME_KINDS[1:])} volumes: other kinds reach storage or "
        "the node outside your team's space",
    )
    own = Rule("claims", _own_claims, "mounts a claim that is not your team's: only {claims} may be mounted")
    host = Rule(
        "host", _no_host_namespaces, "uses hostNetwork, hostPID or hostIPC: pods may not share the node's namespaces"
    )
    containers = (
        ("initContainers", "containers")
        if kind == "TrainJob"
        else ("initContainers", "containers", "ephemeralContainers")
    )
    privileged = Rule(
        "privileged",
        _container_security(containers),
        "asks for a privileged container, added Linux capabilities or a Windows host process: "
        "these control the node, not just your job",
    )
    ports = Rule("hostPort", _no_host_ports, "opens a hostPort: a port on the node is not your job's to take")
    node = Rule(
        "nodeName", _no_node_name, "sets nodeName: pods are placed by the scheduler and your queue, not by name"
    )
    priority = Rule(
        "priorityClassName",
        _priority_classes,
        "sets a priorityClassName that is not one of the platform's: system and other priority classes "
        "would let your pods outrank the platform's controllers and other teams",
    )
    sa_fields = ("serviceAccountName",) if kind == "TrainJob" else ("serviceAccountName", "serviceAccount")
    sa_message = (
        "runs pods as a service account that is not allowed for your jobs (allowed: {serviceAccounts}): "
        "other service accounts carry rights you do not have"
    )
    strict_sa = Rule("serviceAccount", _service_accounts(sa_fields, wide=False), sa_message)
    wide_sa = Rule("serviceAccount", _service_accounts(sa_fields, wide=True), sa_message)
    return {
        "Pod": [volumes, host, privileged, ports, node],
        "JobSet": [volumes, host, privileged, ports, node, priority, wide_sa],
        "TrainingRuntime": [volumes, own, host, privileged, ports, node, priority, strict_sa],
        "TrainJob": [volumes, own, privileged, strict_sa],
    }[kind]


# -- where each kind keeps its pod specs (a list of lists: no flatten needed) ----------------------


def _guarded(*paths: str) -> str:
    return " && ".join(f"has({p})" for p in paths)


_JOB_SPEC = _guarded("j.template", "j.template.spec", "j.template.spec.template", "j.template.spec.template.spec")
_FROM_JOBS = f".filter(j, {_JOB_SPEC}).map(j, j.template.spec.template.spec)"
SPECS = {
    "Pod": "[[object.spec]]",
    "JobSet": f"[object.spec.replicatedJobs{_FROM_JOBS}]",
    "TrainingRuntime": (
        f"{_guarded('object.spec.template', 'object.spec.template.spec', 'object.spec.template.spec.replicatedJobs')}"
        f" ? [object.spec.template.spec.replicatedJobs{_FROM_JOBS}] : []"
    ),
    "TrainJob": (
        "has(object.spec.runtimePatches) ? object.spec.runtimePatches.filter(p, "
        + _guarded(
            "p.trainingRuntimeSpec",
            "p.trainingRuntimeSpec.template",
            "p.trainingRuntimeSpec.template.spec",
            "p.trainingRuntimeSpec.template.spec.replicatedJobs",
        )
        + f").map(p, p.trainingRuntimeSpec.template.spec.replicatedJobs{_FROM_JOBS}) : []"
    ),
}
#: Where claim templates live (JobSet volumeClaimPolicies): they must create a new volume, not bind one.
CLAIM_TEMPLATES = {
    "JobSet": "has(object.spec.volumeClaimPolicies) ? object.spec.volumeClaimPolicies : []",
    "TrainingRuntime": (
        _guarded("object.spec.template", "object.spec.template.spec", "object.spec.template.spec.volumeClaimPolicies")
        + " ? object.spec.template.spec.volumeClaimPolicies : []"
    ),
}
RESOURCES = {
    "Pod": ("", "v1", "pods", ["CREATE"]),
    "JobSet": ("jobset.x-k8s.io", "*", "jobsets", ["CREATE", "UPDATE"]),
    "TrainingRuntime": ("trainer.kubeflow.org", "*", "trainingruntimes", ["CREATE", "UPDATE"]),
    "TrainJob": ("trainer.kubeflow.org", "*", "trainjobs", ["CREATE", "UPDATE"]),
}


def _name() -> str:
    return "(has(object.metadata.name) ? object.metadata.name : '')"


#: Placeholders a message may use: the team's own allow-lists, read from `variables.team`.
PLACEHOLDERS = {
    "{claims}": ("variables.team.claims.join(', ')", "the team's claims"),
    "{queues}": ("variables.team.queues.join(', ')", "the team's LocalQueues"),
    "{serviceAccounts}": ("variables.team.serviceAccounts.join(', ')", "the team's service accounts"),
}


def _validation(kind: str, expression: str, message: str, reason: str = "Forbidden") -> dict[str, Any]:
    """`message` is the static fallback; `messageExpression` names the object and fills the placeholders."""
    static = message
    parts = [json.dumps(f"{kind} "), _name(), json.dumps(" refused: ")]
    rest = message
    while True:
        found = [(rest.index(p), p) for p in PLACEHOLDERS if p in rest]
        if not found:
            parts.append(json.dumps(rest))
            break
        at, placeholder = min(found)
        parts += [json.dumps(rest[:at]), PLACEHOLDERS[placeholder][0]]
        rest = rest[at + len(placeholder) :]
        static = static.replace(placeholder, PLACEHOLDERS[placeholder][1])
    return {
        "expression": expression,
        "message": f"{kind} refused: {static}",
        "messageExpression": " + ".join(p for p in parts if p != '""'),
        "reason": reason,
    }


def namespace_annotations(team: TeamAdmission) -> dict[str, str]:
    """What the policies let this team reference, for its namespace's metadata."""
    lists = {
        "claims": set(team.claims),
        "queues": set(team.queues),
        "serviceAccounts": {DEFAULT_SERVICE_ACCOUNT, *team.service_accounts},
    }
    return {ALLOW_LISTS[key]: ",".join(sorted(names)) for key, names in lists.items()}


_ANNOTATIONS = "namespaceObject.metadata.annotations"


def _has_annotation(key: str) -> str:
    return f"has({_ANNOTATIONS}) && '{key}' in {_ANNOTATIONS}"


def _team_variable(_: AdmissionSettings) -> str:
    """The allow-lists as lists of names; empty lists (nothing allowed) where an annotation is missing."""
    lists = {
        key: f"({_has_annotation(ann)} ? {_ANNOTATIONS}['{ann}'] : '').split(',').filter(n, n != '')"
        for key, ann in ALLOW_LISTS.items()
    }
    return "{" + ", ".join(f"'{key}': {expr}" for key, expr in lists.items()) + "}"


def _known_team(_: AdmissionSettings, kind: str) -> dict[str, Any]:
    return _validation(
        kind,
        " && ".join(f"({_has_annotation(ann)})" for ann in ALLOW_LISTS.values()),
        "this namespace carries the team label but is not a team of this platform",
    )


def _suspend_rule(kind: str, identities: Sequence[str]) -> dict[str, Any]:
    lifted = (
        "request.operation == 'UPDATE' && has(oldObject.spec.suspend) && oldObject.spec.suspend == true && "
        "!(has(object.spec.suspend) && object.spec.suspend == true)"
    )
    return _validation(
        kind,
        f"!({lifted}) || request.userInfo.username in {_lit(sorted(identities))}",
        "only the queue (Kueue) may resume a suspended job: it starts pods when quota is granted",
    )


def _queue_rule() -> dict[str, Any]:
    label = f"object.metadata.labels['{QUEUE_LABEL}']"
    return _validation(
        "TrainJob",
        f"has(object.metadata.labels) && '{QUEUE_LABEL}' in object.metadata.labels && {label} in variables.team.queues",
        f"set the label {QUEUE_LABEL} to your team's queue ({{queues}}): "
        "jobs outside the queue would run without quota",
    )


def _claim_template_rule(kind: str) -> dict[str, Any]:
    binding = " || ".join(f"has(t.spec.{f})" for f in CLAIM_BINDING_FIELDS)
    return _validation(
        kind,
        f"variables.claimTemplates.all(p, !has(p.templates) || p.templates.all(t, !has(t.spec) || !({binding})))",
        f"a volumeClaimPolicies template sets {', '.join(CLAIM_BINDING_FIELDS)}: per-job claims must be new, "
        "empty volumes, not existing ones",
    )


def policy_validations(kind: str, settings: AdmissionSettings) -> list[dict[str, Any]]:
    """The ordered validations of one kind's policy (the unit tests evaluate exactly these)."""
    out = [_known_team(settings, kind)]
    for rule in _rules(kind):
        expr = f"variables.specs.all(l, l.all(s, {rule.build(settings)}))"
        out.append(_validation(kind, expr, rule.message))
    if kind in CLAIM_TEMPLATES:
        out.append(_claim_template_rule(kind))
    if kind == "TrainJob" and settings.kueue_identity:
        out.append(_queue_rule())
        out.append(_suspend_rule(kind, [settings.kueue_identity]))
    if kind == "JobSet":
        out.append(_suspend_rule(kind, [i for i in (settings.trainer_identity, settings.kueue_identity) if i]))
    return out


def policy_variables(kind: str, settings: AdmissionSettings) -> list[dict[str, str]]:
    out = [{"name": "team", "expression": _team_variable(settings)}, {"name": "specs", "expression": SPECS[kind]}]
    if kind in CLAIM_TEMPLATES:
        out.append({"name": "claimTemplates", "expression": CLAIM_TEMPLATES[kind]})
    return out


#: Updates that change neither spec nor labels (finalizers, annotations) are not judged again: an object
#: admitted before a rule existed must still be deletable by its controller.
CHANGED = (
    "request.operation != 'UPDATE' || object.spec != oldObject.spec || "
    "has(object.metadata.labels) != has(oldObject.metadata.labels) || "
    "(has(object.metadata.labels) && object.metadata.labels != oldObject.metadata.labels)"
)


def policy_name(kind: str) -> str:
    return f"{PREFIX}-{kind.lower()}s"


def admission_objects(settings: AdmissionSettings, team_label: str = meta.TEAM_LABEL) -> list[dict[str, Any]]:
    """One ValidatingAdmissionPolicy + Binding per kind (Pod, JobSet, TrainingRuntime, TrainJob)."""
    if not settings.teams:
        return []
    out: list[dict[str, Any]] = []
    selector = {"matchExpressions": [{"key": team_label, "operator": "Exists"}]}
    for kind in RESOURCES:
        group, version, resource, operations = RESOURCES[kind]
        name = policy_name(kind)
        out.append(
            {
                "apiVersion": API,
                "kind": "ValidatingAdmissionPolicy",
                "metadata": meta.metadata(name),
                "spec": {
                    "failurePolicy": "Fail",
                    "matchConditions": [{"name": "spec-or-labels-changed", "expression": CHANGED}],
                    "matchConstraints": {
                        "namespaceSelector": selector,
                        "resourceRules": [
                            {
                                "apiGroups": [group],
                                "apiVersions": [version],
                                "operations": operations,
                                "resources": [resource],
                            }
                        ],
                    },
                    "variables": policy_variables(kind, settings),
                    "validations": policy_validations(kind, settings),
                },
            }
        )
        out.append(
            {
                "apiVersion": API,
                "kind": "ValidatingAdmissionPolicyBinding",
                "metadata": meta.metadata(name),
                "spec": {
                    "policyName": name,
                    "validationActions": ["Deny"],
                    "matchResources": {"namespaceSelector": selector},
                },
            }
        )
    return out
