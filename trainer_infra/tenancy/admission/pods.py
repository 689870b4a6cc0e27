"""Admission rules on every pod spec `s` of an object: what a team's pods may carry (`manifests/pod_rules.py`)."""

from __future__ import annotations

from trainer_infra.manifests.pod_rules import HOST_NAMESPACES, SAFE_VOLUME_KINDS, UNSAFE_VOLUME_KINDS
from trainer_infra.storage.data_cache import CACHE_SUFFIX
from trainer_infra.tenancy.admission.cel import flag, lit
from trainer_infra.tenancy.admission.kinds import ALL
from trainer_infra.tenancy.admission.model import AdmissionRule, AdmissionSettings, AdmittedKind


def _volumes_safe(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    unsafe = " || ".join(f"has(v.{k})" for k in UNSAFE_VOLUME_KINDS)
    return f"!has(s.volumes) || s.volumes.all(v, !({unsafe}))"


VOLUMES = AdmissionRule(
    "volumes",
    ALL,
    "mounts a volume of a kind team namespaces may not use (nfs, csi, hostPath, iscsi, ...). Mount your "
    f"team's claims ({{claims}}) or {', '.join(SAFE_VOLUME_KINDS[1:])} volumes: other kinds reach storage or "
    "the node outside your team's space",
    _volumes_safe,
    per_pod=True,
)


def _own_claims(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    return (
        "!has(s.volumes) || s.volumes.all(v, !has(v.persistentVolumeClaim) || "
        "v.persistentVolumeClaim.claimName in variables.team.claims)"
    )


CLAIMS = AdmissionRule(
    "claims",
    ("TrainingRuntime", "TrainJob"),
    "mounts a claim that is not your team's: only {claims} may be mounted",
    _own_claims,
    per_pod=True,
)


def _no_host_namespaces(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    return " && ".join(f"!{flag('s.' + f)}" for f in HOST_NAMESPACES)


HOST = AdmissionRule(
    "host",
    ("Pod", "JobSet", "TrainingRuntime"),
    "uses hostNetwork, hostPID or hostIPC: pods may not share the node's namespaces",
    _no_host_namespaces,
    per_pod=True,
)


def _container_security(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    sc = "c.securityContext"
    bad = (
        f"{flag(sc + '.privileged')} || "
        f"(has({sc}.capabilities) && has({sc}.capabilities.add) && size({sc}.capabilities.add) > 0) || "
        f"(has({sc}.windowsOptions) && {flag(sc + '.windowsOptions.hostProcess')})"
    )
    per_field = [f"(!has(s.{f}) || s.{f}.all(c, !has({sc}) || !({bad})))" for f in kind.containers]
    windows = "s.securityContext.windowsOptions"
    pod_level = f"!(has(s.securityContext) && has({windows}) && {flag(windows + '.hostProcess')})"
    return " && ".join([*per_field, pod_level])


PRIVILEGED = AdmissionRule(
    "privileged",
    ALL,
    "asks for a privileged container, added Linux capabilities or a Windows host process: "
    "these control the node, not just your job",
    _container_security,
    per_pod=True,
)


def _no_host_ports(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    return " && ".join(
        f"(!has(s.{f}) || s.{f}.all(c, !has(c.ports) || c.ports.all(p, !has(p.hostPort) || p.hostPort == 0)))"
        for f in ("initContainers", "containers")
    )


HOST_PORTS = AdmissionRule(
    "hostPort",
    ("Pod", "JobSet", "TrainingRuntime"),
    "opens a hostPort: a port on the node is not your job's to take",
    _no_host_ports,
    per_pod=True,
)


def _no_node_name(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    return "!has(s.nodeName) || s.nodeName == ''"


NODE_NAME = AdmissionRule(
    "nodeName",
    ("Pod", "JobSet", "TrainingRuntime"),
    "sets nodeName: pods are placed by the scheduler and your queue, not by name",
    _no_node_name,
    per_pod=True,
)


def _priority_classes(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    allowed = lit(sorted(settings.priority_classes))
    return f"!has(s.priorityClassName) || s.priorityClassName == '' || s.priorityClassName in {allowed}"


PRIORITY_CLASS = AdmissionRule(
    "priorityClassName",
    ("Pod", "JobSet", "TrainingRuntime"),
    "sets a priorityClassName that is not one of the platform's: system and other priority classes "
    "would let your pods outrank the platform's controllers and other teams",
    _priority_classes,
    per_pod=True,
)


def _service_accounts(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    # a JobSet (and its pods) may also run as the data cache initializer, whose account only the platform's cache
    # runtime names; a cache cluster's pods run as their LeaderWorkerSet's own `<trainjob>-cache` account
    wide = kind.name in ("JobSet", "Pod") and settings.data_cache_service_account
    extra = [settings.data_cache_service_account] if wide else []
    allowed = f"(variables.team.serviceAccounts + {lit(sorted(extra))})"
    lws = ""
    if kind.name == "Pod" and settings.data_cache_service_account:
        name = f"object.metadata.labels['{LWS_NAME_LABEL}']"
        lws = (
            f" || (has(object.metadata.labels) && '{LWS_NAME_LABEL}' in object.metadata.labels && "
            f"{name}.endsWith('{CACHE_SUFFIX}') && s.{{f}} == {name})"
        )
    return " && ".join(
        f"(!has(s.{f}) || s.{f} == '' || s.{f} in {allowed}{lws.replace('{f}', f)})"
        for f in kind.service_account_fields
    )


LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"

SERVICE_ACCOUNT = AdmissionRule(
    "serviceAccount",
    ("Pod", "JobSet", "TrainingRuntime", "TrainJob"),
    "runs pods as a service account that is not allowed for your jobs (allowed: {serviceAccounts}): "
    "other service accounts carry rights you do not have",
    _service_accounts,
    per_pod=True,
)
