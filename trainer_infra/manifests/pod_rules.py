"""What a pod spec of a team may carry: one vocabulary, read by the admission policies (the CEL of each rule),
the catalog loader and the CrossGuard rule (`pod_spec_problems`, the Python of the same rules) and `migrate`
(which words the node-reaching rules as Pod Security does). Each `PodRule` holds both forms side by side;
A unit test (test_pod_rules_agree) proves they refuse the same pods. A new rule is one entry in `RULES`.

A team member is hostile input: an inline `nfs`/`csi`/`hostPath` volume reaches storage outside the team's
claim (every team claim is a subdirectory of one export), host namespaces and privileged containers reach
the node, a priority class like `system-node-critical` outranks the platform's controllers, and a token for the
Trainer status server's audience of another job posts that job's progress.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from trainer_infra.core.upstream import trainer
from trainer_infra.manifests.pod_walk import CONTAINER_LISTS, TEMPLATE_LISTS, by_name, containers

#: Volume kinds a team's pods may use: its claims and what lives inside the pod or the namespace.
SAFE_VOLUME_KINDS = ("persistentVolumeClaim", "emptyDir", "configMap", "secret", "projected", "downwardAPI")
#: Every other kind of the core Volume (as in the Trainer 2.2.1/2.3.0 and JobSet 0.11/0.12 CRD schemas).
#: A CEL `has()` on a field missing from a schema does not compile, so this list is checked against the
#: CRDs in the tests; a new kind in a future schema fails that test until it is listed here.
UNSAFE_VOLUME_KINDS = (
    "awsElasticBlockStore",
    "azureDisk",
    "azureFile",
    "cephfs",
    "cinder",
    "csi",
    "ephemeral",
    "fc",
    "flexVolume",
    "flocker",
    "gcePersistentDisk",
    "gitRepo",
    "glusterfs",
    "hostPath",
    "image",
    "iscsi",
    "nfs",
    "photonPersistentDisk",
    "portworxVolume",
    "quobyte",
    "rbd",
    "scaleIO",
    "storageos",
    "vsphereVolume",
)
HOST_NAMESPACES = ("hostNetwork", "hostPID", "hostIPC")
#: Claim template fields that bind to an existing volume (possibly another team's) instead of a new one.
CLAIM_BINDING_FIELDS = ("volumeName", "selector", "dataSource", "dataSourceRef")
DEFAULT_SERVICE_ACCOUNT = "default"


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _volumes(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    items = spec.get("volumes")
    return [v for v in items if isinstance(v, dict)] if isinstance(items, list) else []


@dataclass(frozen=True)
class PodSchema:
    """The pod-spec fields an object's schema has (a CEL `has()` on a field it lacks does not compile)."""

    containers: tuple[str, ...] = CONTAINER_LISTS
    service_account_fields: tuple[str, ...] = ("serviceAccountName", "serviceAccount")


@dataclass(frozen=True)
class Lists:
    """The allow-lists a rule checks against: CEL expressions (admission) or names (offline); None: not
    known here, the rule is not checked (a catalog runtime has no team yet)."""

    claims: Any = None
    service_accounts: Any = None
    priority_classes: Any = None
    #: what Trainer injects for its status server that this pod spec may carry (a `StatusInjection`); None:
    #: nothing of it (member-written objects, or progress off)
    status: Any = None


@dataclass(frozen=True)
class StatusInjection:
    """What Trainer injects into one TrainJob's trainer pods for its status server: the token's audience, the CA's
    ConfigMap and the env, as CEL expressions (admission) or values (offline)."""

    audience: str
    config_map: str
    env: Mapping[str, str]


@dataclass(frozen=True)
class PodRule:
    """One rule on a pod spec: `cel(schema, lists)` is true for an acceptable pod spec `s`;
    `problems(spec, lists)` are the plain-words problems of a spec (empty: acceptable). `kinds`: the admitted
    kinds whose policy holds it; `message`: what a data scientist is told at admission."""

    name: str
    kinds: tuple[str, ...]
    message: str
    cel: Callable[[PodSchema, Lists], str]
    problems: Callable[[Mapping[str, Any], Lists], list[str]]


def _flag(expr: str) -> str:
    """CEL: `expr` is set and true (absent booleans are false)."""
    parent, _, field = expr.rpartition(".")
    return f"(has({parent}.{field}) && {parent}.{field})"


# -- volumes ----------------------------------------------------------------------------------------


def _volumes_cel(schema: PodSchema, lists: Lists) -> str:
    unsafe = " || ".join(f"has(v.{k})" for k in UNSAFE_VOLUME_KINDS)
    return f"!has(s.volumes) || s.volumes.all(v, !({unsafe}))"


def _volumes_problems(spec: Mapping[str, Any], lists: Lists) -> list[str]:
    problems = []
    for v in _volumes(spec):
        unsafe = [k for k in v if k in UNSAFE_VOLUME_KINDS]
        if unsafe:
            problems.append(
                f"volume {v.get('name', '?')!r} is of kind {unsafe[0]}: only claims and "
                f"{', '.join(SAFE_VOLUME_KINDS[1:])} volumes are allowed (other kinds reach storage or the node "
                "outside the team's space)"
            )
    return problems


VOLUMES = PodRule(
    "volumes",
    ("Pod", "JobSet", "TrainingRuntime", "TrainJob"),
    "mounts a volume of a kind team namespaces may not use (nfs, csi, hostPath, iscsi, ...). Mount your "
    f"team's claims ({{claims}}) or {', '.join(SAFE_VOLUME_KINDS[1:])} volumes: other kinds reach storage or "
    "the node outside your team's space",
    _volumes_cel,
    _volumes_problems,
)

# -- claims -----------------------------------------------------------------------------------------


def _claims_cel(schema: PodSchema, lists: Lists) -> str:
    return (
        "!has(s.volumes) || s.volumes.all(v, !has(v.persistentVolumeClaim) || "
        f"v.persistentVolumeClaim.claimName in {lists.claims})"
    )


def _claims_problems(spec: Mapping[str, Any], lists: Lists) -> list[str]:
    if lists.claims is None:
        return []
    problems = []
    for v in _volumes(spec):
        claim = _dict(v.get("persistentVolumeClaim")).get("claimName")
        if claim is not None and claim not in lists.claims:
            problems.append(f"volume {v.get('name', '?')!r} mounts claim {claim!r}: not one of {list(lists.claims)}")
    return problems


CLAIMS = PodRule(
    "claims",
    ("TrainingRuntime", "TrainJob"),
    "mounts a claim that is not your team's: only {claims} may be mounted",
    _claims_cel,
    _claims_problems,
)

# -- one volume per claim ---------------------------------------------------------------------------

_SECOND_VOLUME = "the kubelet never mounts a second volume of one claim (kubernetes#132921)"


def _claim_once_cel(schema: PodSchema, lists: Lists) -> str:
    same = "w.persistentVolumeClaim.claimName == v.persistentVolumeClaim.claimName"
    return (
        "!has(s.volumes) || s.volumes.all(v, !has(v.persistentVolumeClaim) || "
        f"size(s.volumes.filter(w, has(w.persistentVolumeClaim) && {same})) == 1)"
    )


def _claim_once_problems(spec: Mapping[str, Any], lists: Lists) -> list[str]:
    first: dict[str, Any] = {}
    problems = []
    for v in _volumes(spec):
        claim = _dict(v.get("persistentVolumeClaim")).get("claimName")
        if not isinstance(claim, str):  # hostile input: a claim name of another type is the claims rule's to report
            continue
        if claim in first:
            problems.append(
                f"volumes {first[claim]!r} and {v.get('name', '?')!r} both mount claim {claim!r}: {_SECOND_VOLUME}"
            )
        first.setdefault(claim, v.get("name", "?"))
    return problems


CLAIM_ONCE = PodRule(
    "claimOnce",
    ("Pod", "JobSet", "TrainingRuntime", "TrainJob"),
    f"has two volumes of the same claim: {_SECOND_VOLUME}, so the pod never starts while the job holds its quota. "
    "Mount the one volume as often as you need (subPath for a directory)",
    _claim_once_cel,
    _claim_once_problems,
)

# -- host namespaces --------------------------------------------------------------------------------


def _host_cel(schema: PodSchema, lists: Lists) -> str:
    return " && ".join(f"!{_flag('s.' + f)}" for f in HOST_NAMESPACES)


def _host_problems(spec: Mapping[str, Any], lists: Lists) -> list[str]:
    return [f"{f}: true shares the node's namespace with the pod" for f in HOST_NAMESPACES if spec.get(f) is True]


HOST = PodRule(
    "host",
    ("Pod", "JobSet", "TrainingRuntime"),
    "uses hostNetwork, hostPID or hostIPC: pods may not share the node's namespaces",
    _host_cel,
    _host_problems,
)

# -- privileged containers, added capabilities, Windows host processes ------------------------------

#: the one capability a container may add (Pod Security `restricted` allows exactly this one): binding ports below
#: 1024 in the pod's own network namespace. Upstream's MPI images carry it as sshd's file capability, which the
#: kernel refuses to execute without it in the bounding set (docs/teams.md#pod-security). Exact spelling only.
ALLOWED_CAPABILITIES = ("NET_BIND_SERVICE",)


def _privileged_cel(schema: PodSchema, lists: Lists) -> str:
    sc = "c.securityContext"
    bad = (
        f"{_flag(sc + '.privileged')} || "
        f"(has({sc}.capabilities) && has({sc}.capabilities.add) && "
        f"!{sc}.capabilities.add.all(a, a in {json.dumps(list(ALLOWED_CAPABILITIES))})) || "
        f"(has({sc}.windowsOptions) && {_flag(sc + '.windowsOptions.hostProcess')})"
    )
    per_field = [f"(!has(s.{f}) || s.{f}.all(c, !has({sc}) || !({bad})))" for f in schema.containers]
    windows = "s.securityContext.windowsOptions"
    pod_level = f"!(has(s.securityContext) && has({windows}) && {_flag(windows + '.hostProcess')})"
    return " && ".join([*per_field, pod_level])


def _privileged_problems(spec: Mapping[str, Any], lists: Lists) -> list[str]:
    problems = []
    if _dict(_dict(spec.get("securityContext")).get("windowsOptions")).get("hostProcess") is True:
        problems.append("securityContext: hostProcess pods run on the node")
    for at, c in containers(spec):
        where = by_name(at, c)
        sc = _dict(c.get("securityContext"))
        if sc.get("privileged") is True:
            problems.append(f"{where}: privileged containers control the node")
        added = _dict(sc.get("capabilities")).get("add") or []
        if refused := sorted({str(a) for a in added} - set(ALLOWED_CAPABILITIES)):
            problems.append(f"{where}: adds capabilities {refused} (only {', '.join(ALLOWED_CAPABILITIES)} may be)")
        if _dict(sc.get("windowsOptions")).get("hostProcess") is True:
            problems.append(f"{where}: hostProcess containers run on the node")
    return problems


PRIVILEGED = PodRule(
    "privileged",
    ("Pod", "JobSet", "TrainingRuntime", "TrainJob"),
    "asks for a privileged container, added Linux capabilities other than NET_BIND_SERVICE or a Windows host "
    "process: these control the node, not just your job",
    _privileged_cel,
    _privileged_problems,
)

# -- host ports -------------------------------------------------------------------------------------

#: ephemeral containers may not declare ports
_PORT_FIELDS = TEMPLATE_LISTS


def _host_ports_cel(schema: PodSchema, lists: Lists) -> str:
    return " && ".join(
        f"(!has(s.{f}) || s.{f}.all(c, !has(c.ports) || c.ports.all(p, !has(p.hostPort) || p.hostPort == 0)))"
        for f in _PORT_FIELDS
    )


def _host_ports_problems(spec: Mapping[str, Any], lists: Lists) -> list[str]:
    return [
        f"{by_name(where, c)}: hostPort opens a port on the node"
        for where, c in containers(spec, _PORT_FIELDS)
        if any(_dict(p).get("hostPort") for p in c.get("ports") or [])
    ]


HOST_PORTS = PodRule(
    "hostPort",
    ("Pod", "JobSet", "TrainingRuntime"),
    "opens a hostPort: a port on the node is not your job's to take",
    _host_ports_cel,
    _host_ports_problems,
)

# -- nodeName ---------------------------------------------------------------------------------------


def _node_name_cel(schema: PodSchema, lists: Lists) -> str:
    return "!has(s.nodeName) || s.nodeName == ''"


def _node_name_problems(spec: Mapping[str, Any], lists: Lists) -> list[str]:
    return (
        ["nodeName binds pods to a node past the scheduler and the queue's placement"] if spec.get("nodeName") else []
    )


NODE_NAME = PodRule(
    "nodeName",
    ("Pod", "JobSet", "TrainingRuntime"),
    "sets nodeName: pods are placed by the scheduler and your queue, not by name",
    _node_name_cel,
    _node_name_problems,
)

# -- priority classes -------------------------------------------------------------------------------


def _priority_cel(schema: PodSchema, lists: Lists) -> str:
    allowed = lists.priority_classes
    return f"!has(s.priorityClassName) || s.priorityClassName == '' || s.priorityClassName in {allowed}"


def _priority_problems(spec: Mapping[str, Any], lists: Lists) -> list[str]:
    pc = spec.get("priorityClassName")
    allowed = sorted(set(lists.priority_classes or ()))
    if lists.priority_classes is None or not pc or pc in allowed:
        return []
    return [f"priorityClassName {pc!r} is not one of the platform's priority classes {allowed}"]


PRIORITY_CLASS = PodRule(
    "priorityClassName",
    ("Pod", "JobSet", "TrainingRuntime"),
    "sets a priorityClassName that is not one of the platform's: system and other priority classes "
    "would let your pods outrank the platform's controllers and other teams",
    _priority_cel,
    _priority_problems,
)

# -- the Trainer status server's token, CA and env -----------------------------------------------------


def _named(ref: str) -> str:
    """CEL: the name of the ConfigMap reference `ref`, '' when unset."""
    return f"(has({ref}.name) ? {ref}.name : '')"


def _no_status_names(v: str) -> str:
    """CEL: volume `v` has no token for a status audience and no status CA ConfigMap (any job's)."""
    prefix, suffix = trainer.STATUS_AUDIENCE_PREFIX, trainer.STATUS_CONFIG_MAP_SUFFIX
    source = (
        f"(!has(p.serviceAccountToken) || !has(p.serviceAccountToken.audience) || "
        f"!p.serviceAccountToken.audience.startsWith('{prefix}')) && "
        f"(!has(p.configMap) || !{_named('p.configMap')}.endsWith('{suffix}'))"
    )
    return (
        f"(!has({v}.configMap) || !{_named(f'{v}.configMap')}.endsWith('{suffix}')) && "
        f"(!has({v}.projected) || !has({v}.projected.sources) || {v}.projected.sources.all(p, {source}))"
    )


def _status_cel(schema: PodSchema, lists: Lists) -> str:
    allowed: StatusInjection | None = lists.status
    name = trainer.STATUS_TOKEN_VOLUME
    env = json.dumps(list(trainer.STATUS_ENV))
    if allowed is None:
        volume = f"v.name != '{name}' && {_no_status_names('v')}"
        env_ok = f"!(e.name in {env})"
        mount_ok = f"(!has(c.volumeMounts) || c.volumeMounts.all(m, m.name != '{name}'))"
    else:
        own = (
            f"(has(p.serviceAccountToken) && has(p.serviceAccountToken.audience) && "
            f"p.serviceAccountToken.audience == {allowed.audience}) || "
            f"(has(p.configMap) && {_named('p.configMap')} == {allowed.config_map})"
        )
        injected = f"has(v.projected) && has(v.projected.sources) && v.projected.sources.all(p, {own})"
        volume = f"v.name == '{name}' ? ({injected}) : ({_no_status_names('v')})"
        values = "{" + ", ".join(f"'{k}': {allowed.env[k]}" for k in trainer.STATUS_ENV) + "}"
        env_ok = f"!(e.name in {env}) || (has(e.value) && e.value == {values}[e.name])"
        mount_ok = ""
    checks = f"(!has(c.env) || c.env.all(e, {env_ok}))" + (f" && {mount_ok}" if mount_ok else "")
    lists_ok = " && ".join(f"(!has(s.{f}) || s.{f}.all(c, {checks}))" for f in schema.containers)
    return f"(!has(s.volumes) || s.volumes.all(v, {volume})) && {lists_ok}"


def _sources(v: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    items = _dict(v.get("projected")).get("sources")
    return [_dict(p) for p in items] if isinstance(items, list) else []


def _status_problems(spec: Mapping[str, Any], lists: Lists) -> list[str]:
    allowed: StatusInjection | None = lists.status
    name = trainer.STATUS_TOKEN_VOLUME
    problems = []
    for v in _volumes(spec):
        sources = _sources(v)
        tokens = [_dict(p.get("serviceAccountToken")).get("audience") for p in sources if "serviceAccountToken" in p]
        maps = [_dict(p.get("configMap")).get("name") or "" for p in sources if "configMap" in p]
        maps += [_dict(v.get("configMap")).get("name") or ""] if "configMap" in v else []
        if v.get("name") == name and allowed is not None:
            ok = isinstance(_dict(v.get("projected")).get("sources"), list) and all(
                ("serviceAccountToken" in p and _dict(p["serviceAccountToken"]).get("audience") == allowed.audience)
                or ("configMap" in p and (_dict(p["configMap"]).get("name") or "") == allowed.config_map)
                for p in sources
            )
            if not ok:
                problems.append(f"volume {name!r} is not what Trainer injects for this job's status server")
            continue
        if v.get("name") == name:
            problems.append(f"volume {name!r} has the name of the volume Trainer injects for its status server")
        audiences = [a for a in tokens if isinstance(a, str) and a.startswith(trainer.STATUS_AUDIENCE_PREFIX)]
        if audiences:
            problems.append(f"volume {v.get('name', '?')!r} asks for a token for the status server ({audiences[0]})")
        status_maps = [m for m in maps if isinstance(m, str) and m.endswith(trainer.STATUS_CONFIG_MAP_SUFFIX)]
        if status_maps:
            problems.append(f"volume {v.get('name', '?')!r} mounts the status server's CA ConfigMap {status_maps[0]!r}")
    for where, c in containers(spec):
        env = c.get("env")
        for e in env if isinstance(env, list) else []:
            e = _dict(e)
            if e.get("name") in trainer.STATUS_ENV and (allowed is None or e.get("value") != allowed.env[e["name"]]):
                problems.append(f"{by_name(where, c)}: sets {e['name']}, which only Trainer sets")
        mounts = c.get("volumeMounts")
        for m in mounts if isinstance(mounts, list) and allowed is None else []:
            if _dict(m).get("name") == name:
                problems.append(f"{by_name(where, c)}: mounts volume {name!r}, which only Trainer adds")
    return problems


STATUS_SERVER = PodRule(
    "statusServer",
    ("Pod", "JobSet", "TrainingRuntime", "TrainJob"),
    f"names what Trainer injects into a job's pods for its status server: the volume {trainer.STATUS_TOKEN_VOLUME}, "
    f"a token for an audience {trainer.STATUS_AUDIENCE_PREFIX}/…, a ConfigMap <job>"
    f"{trainer.STATUS_CONFIG_MAP_SUFFIX} or the env {', '.join(trainer.STATUS_ENV)}. With them a pod could post "
    "progress as another job, or send its job's token elsewhere. Trainer adds them to your job's own pods when "
    "progress is on: call update_trainjob_status() from your training script",
    _status_cel,
    _status_problems,
)

# -- service accounts -------------------------------------------------------------------------------


def _service_account_cel(schema: PodSchema, lists: Lists) -> str:
    allowed = lists.service_accounts
    return " && ".join(f"(!has(s.{f}) || s.{f} == '' || s.{f} in {allowed})" for f in schema.service_account_fields)


def _service_account_problems(spec: Mapping[str, Any], lists: Lists) -> list[str]:
    if lists.service_accounts is None:
        return []
    return [
        f"{f} {spec[f]!r} is not one of the team's service accounts {sorted(lists.service_accounts)}"
        for f in PodSchema().service_account_fields
        if spec.get(f) and spec[f] not in lists.service_accounts
    ]


SERVICE_ACCOUNT = PodRule(
    "serviceAccount",
    ("Pod", "JobSet", "TrainingRuntime", "TrainJob"),
    "runs pods as a service account that is not allowed for your jobs (allowed: {serviceAccounts}): "
    "other service accounts carry rights you do not have",
    _service_account_cel,
    _service_account_problems,
)

#: Every pod rule, in the order admission checks and the offline policy reports them.
RULES: tuple[PodRule, ...] = (
    VOLUMES,
    CLAIMS,
    CLAIM_ONCE,
    HOST,
    PRIVILEGED,
    HOST_PORTS,
    NODE_NAME,
    PRIORITY_CLASS,
    SERVICE_ACCOUNT,
    STATUS_SERVER,
)


def pod_spec_problems(
    spec: Mapping[str, Any],
    priority_classes: Iterable[str] = (),
    *,
    claims: Iterable[str] | None = None,
    service_accounts: Iterable[str] | None = None,
) -> list[str]:
    """Plain-words problems of one pod spec (empty: acceptable in a team namespace). The team's `claims` and
    `service_accounts` are checked when given (a catalog runtime has no team yet)."""
    known = Lists(
        claims=None if claims is None else tuple(claims),
        service_accounts=None if service_accounts is None else tuple(service_accounts),
        priority_classes=tuple(priority_classes),
    )
    return [p for rule in RULES for p in rule.problems(spec, known)]
