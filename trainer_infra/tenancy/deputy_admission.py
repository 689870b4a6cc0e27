"""The deputies bounded at their own admission: what the data cache's identities create in a team namespace
must be what trainer's `pkg/initializers/dataset/cache.py` (2.2.1, 2.3.0) creates with the platform's pinned
settings, whoever asks. A member who got code to run as the cache initializer (or who found a route this
platform does not know of) still gets only one cache cluster of the pinned image and size per TrainJob, a
ClusterIP Service and a ServiceAccount with the platform's cloud role.

- LeaderWorkerSet (only the cache initializer may create them in team namespaces; the rule holds for anyone):
  `<trainjob>-cache` controlled by the TrainJob `<trainjob>` (one per TrainJob), one replica of
  `dataCache.cluster.size` pods, no queue label or the team's (Kueue charges neither: see
  `deputies.CACHE_CLUSTER_CHARGE`), head and worker templates of one
  container each with the pinned image, command, env names and resources, running as `<trainjob>-cache`;
  no volumes, claim templates, init containers, security context, priority class, tolerations or nodeName.
- Service (anyone): ClusterIP only, no externalIPs (CVE-2020-8554), no nodePort; from the cache initializer:
  `<trainjob>-cache-service` selecting its own head pod.
- ServiceAccount (from the cache initializer): `<trainjob>-cache`, the IRSA annotations cache.py sets, with
  the platform's role.

These kinds carry no member input of their own (only the deputy creates them), so they are not kinds of the
admission registry (`tenancy/admission/`, whose rules judge what members submit): their checks are shapes of
one upstream program's output, with their own match conditions (a ServiceAccount has no spec).
"""

from __future__ import annotations

from typing import Any

from trainer_infra.core.kueue import QUEUE_LABEL
from trainer_infra.storage.data_cache import (
    CACHE_POD_ENV,
    CACHE_SUFFIX,
    ROLE_ANNOTATION,
    SERVICE_SUFFIX,
    STS_ANNOTATION,
)
from trainer_infra.tenancy.admission.cel import lit as _lit
from trainer_infra.tenancy.admission.kinds import KINDS
from trainer_infra.tenancy.admission.model import AdmissionSettings
from trainer_infra.tenancy.admission.policy import CHANGED, PREFIX, _team_variable, _validation, team_policy
from trainer_infra.tenancy.admission.requests import KNOWN_TEAM
from trainer_infra.tenancy.deputies import CacheDeputy

RESOURCES = {
    "LeaderWorkerSet": ("leaderworkerset.x-k8s.io", "*", "leaderworkersets", ("CREATE", "UPDATE")),
    "Service": ("", "v1", "services", ("CREATE", "UPDATE")),
    "ServiceAccount": ("", "v1", "serviceaccounts", ("CREATE", "UPDATE")),
}
_LWT = "object.spec.leaderWorkerTemplate"
TEMPLATES = (
    f"has({_LWT}.workerTemplate.spec) ? [{_LWT}.workerTemplate] + "
    f"(has({_LWT}.leaderTemplate) && has({_LWT}.leaderTemplate.spec) ? [{_LWT}.leaderTemplate] : []) : []"
)


def _as(sa: str) -> str:
    return f"request.userInfo.username == 'system:serviceaccount:' + request.namespace + ':{sa}'"


def _name() -> str:
    return "(has(object.metadata.name) ? object.metadata.name : '')"


def _lws_validations(cache: CacheDeputy, priority_classes: tuple[str, ...]) -> list[dict[str, Any]]:
    kind = "LeaderWorkerSet"
    name = _name()
    head_cpu, head_mem = cache.head
    worker_cpu, worker_mem = cache.worker

    def res(c: str, field: str, cpu: str, mem: str) -> str:
        r = f"{c}.resources.{field}"
        return (
            f"has({r}) && {r}.all(k, k in ['cpu', 'memory']) && 'cpu' in {r} && 'memory' in {r} && "
            f"string({r}['cpu']) == {_lit(cpu)} && string({r}['memory']) == {_lit(mem)}"
        )

    def shaped(role: str, cpu: str, mem: str) -> str:
        c = "t.spec.containers[0]"
        return (
            f"({c}.name == '{role}' && has({c}.command) && {c}.command == ['{role}'] && has({c}.resources) && "
            f"({res(c, 'limits', cpu, mem)}) && ({res(c, 'requests', cpu, mem)}))"
        )

    c0 = "t.spec.containers[0]"
    container = (
        f"size(t.spec.containers) == 1 && has({c0}.image) && {c0}.image == {_lit(cache.cache_image)} && "
        f"({shaped('head', head_cpu, head_mem)} || {shaped('worker', worker_cpu, worker_mem)}) && "
        f"!has({c0}.volumeMounts) && !has({c0}.envFrom) && !has({c0}.securityContext) && "
        f"!has({c0}.resources.claims) && "
        f"(!has({c0}.env) || {c0}.env.all(e, e.name in {_lit(list(CACHE_POD_ENV))}))"
    )
    no_extras = " && ".join(
        f"!has(t.spec.{f})"
        for f in (
            "initContainers",
            "ephemeralContainers",
            "volumes",
            "securityContext",
            "nodeName",
            "tolerations",
            "hostNetwork",
            "hostPID",
            "hostIPC",
            "runtimeClassName",
            "schedulerName",
            "resourceClaims",
        )
    )
    priority = f"(!has(t.spec.priorityClassName) || t.spec.priorityClassName in {_lit(sorted(priority_classes))})"
    sa = f"has(t.spec.serviceAccountName) && t.spec.serviceAccountName == {name}"
    labels = "object.metadata.labels"
    queue = (
        f"(!has({labels}) || !('{QUEUE_LABEL}' in {labels}) || {labels}['{QUEUE_LABEL}'] in variables.team.queues)"
        " && has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(o, "
        "o.apiVersion.startsWith('trainer.kubeflow.org/') && o.kind == 'TrainJob' && has(o.controller) && "
        f"o.controller && o.name + '{CACHE_SUFFIX}' == {name})"
    )
    what = "only the data cache creates LeaderWorkerSets in team namespaces, as trainer's cache.py does"
    return [
        _validation(
            kind,
            f"{name}.endsWith('{CACHE_SUFFIX}')",
            f"metadata.name must be <trainjob>{CACHE_SUFFIX}: {what}",
        ),
        _validation(
            kind,
            queue,
            f"metadata.ownerReferences must name its TrainJob <trainjob> as controller (one cache cluster per "
            f"TrainJob, as cache.py creates it) and metadata.labels[{QUEUE_LABEL}], if set, your team's queue "
            "({queues})",
        ),
        _validation(
            kind,
            f"(!has(object.spec.replicas) || object.spec.replicas == 1) && "
            f"(!has({_LWT}.size) || {_LWT}.size <= {cache.size}) && !has({_LWT}.volumeClaimTemplates)",
            f"spec.replicas must be 1 and spec.leaderWorkerTemplate.size at most {cache.size} "
            "(dataCache.cluster.size), without volumeClaimTemplates: the platform sizes the cache cluster",
        ),
        _validation(
            kind,
            f"variables.templates.all(t, {container})",
            "spec.leaderWorkerTemplate.{leader,worker}Template must run one container, head or worker, with the "
            f"pinned cache image {cache.cache_image}, its command, the resources of dataCache.cluster "
            f"(head {head_cpu}/{head_mem}, worker {worker_cpu}/{worker_mem}), env {', '.join(CACHE_POD_ENV)} "
            "only and no mounts or securityContext: what trainer's cache initializer creates",
        ),
        _validation(
            kind,
            f"variables.templates.all(t, {no_extras} && {priority} && {sa})",
            "spec.leaderWorkerTemplate: pods must run as the LeaderWorkerSet's own ServiceAccount "
            f"(<trainjob>{CACHE_SUFFIX}), without volumes, init containers, securityContext, nodeName, "
            "tolerations, host namespaces, runtimeClassName, schedulerName, resourceClaims or a priority class "
            "the platform does not allow",
        ),
    ]


def _service_validations(cache: CacheDeputy | None) -> list[dict[str, Any]]:
    kind = "Service"
    s = "object.spec"
    out = [
        _validation(
            kind,
            f"!has({s}.type) || {s}.type == 'ClusterIP'",
            "spec.type must be ClusterIP: LoadBalancer, NodePort and ExternalName Services expose or redirect "
            "traffic outside the team namespace",
        ),
        _validation(
            kind,
            f"(!has({s}.externalIPs) || size({s}.externalIPs) == 0) && !has({s}.loadBalancerIP) && "
            f"(!has({s}.ports) || {s}.ports.all(p, !has(p.nodePort) || p.nodePort == 0))",
            "spec.externalIPs, loadBalancerIP and nodePort are refused: an external IP captures that address's "
            "traffic cluster-wide (CVE-2020-8554)",
        ),
    ]
    if cache is not None:
        name = _name()
        head = f"{name}.substring(0, size({name}) - {len(SERVICE_SUFFIX) - len(CACHE_SUFFIX)}) + '-head'"
        out.append(
            _validation(
                kind,
                f"!({_as(cache.service_account)}) || ({name}.endsWith('{SERVICE_SUFFIX}') && has({s}.selector) && "
                f"{s}.selector == {{'app': {head}}})",
                f"the data cache's Service must be <trainjob>{SERVICE_SUFFIX} selecting its own head pod "
                f"(app: <trainjob>{CACHE_SUFFIX}-head), as cache.py creates it",
            )
        )
    return out


def _service_account_validations(cache: CacheDeputy) -> list[dict[str, Any]]:
    kind = "ServiceAccount"
    ann = "object.metadata.annotations"
    allowed = {ROLE_ANNOTATION: cache.iam_role, STS_ANNOTATION: "true"}
    annotations = f"(!has({ann}) || {ann}.all(k, k in {_lit(sorted(allowed))} && {ann}[k] == {_lit(allowed)}[k]))"
    secrets = "!has(object.secrets) && !has(object.imagePullSecrets)"
    return [
        _validation(
            kind,
            f"{_name()}.endsWith('{CACHE_SUFFIX}') && {annotations} && {secrets}",
            f"the data cache's ServiceAccount must be <trainjob>{CACHE_SUFFIX} with the platform's role "
            f"({ROLE_ANNOTATION}: {cache.iam_role or 'empty'}, dataCache.cluster.iamRole) and no secrets",
        )
    ]


def _known_team(settings: AdmissionSettings, kind: str) -> dict[str, Any]:
    expression = KNOWN_TEAM.expression(KINDS["Pod"], settings)  # a request rule: the same for every kind
    assert expression is not None
    return _validation(kind, expression, KNOWN_TEAM.message)


def policy_name(kind: str) -> str:
    return f"{PREFIX}-{kind.lower()}s"


def deputy_policies(settings: AdmissionSettings, cache: CacheDeputy | None) -> list[dict[str, Any]]:
    """Policy + binding for LeaderWorkerSets (with the data cache), Services and the cache's ServiceAccounts."""
    if not settings.teams:
        return []
    validations: dict[str, list[dict[str, Any]]] = {"Service": _service_validations(cache)}
    if cache is not None:
        validations["LeaderWorkerSet"] = _lws_validations(cache, settings.priority_classes)
        validations["ServiceAccount"] = _service_account_validations(cache)
    out: list[dict[str, Any]] = []
    for kind in sorted(validations):
        variables = [{"name": "team", "expression": _team_variable()}]
        if kind == "LeaderWorkerSet":
            variables.append({"name": "templates", "expression": TEMPLATES})
        # ServiceAccounts have no spec and are created by the platform and the namespace's controllers too:
        # only the cache initializer's requests are judged
        match = ("spec-or-labels-changed", CHANGED)
        if kind == "ServiceAccount" and cache is not None:
            match = ("by-the-cache-initializer", _as(cache.service_account))
        checks = [_known_team(settings, kind), *validations[kind]]
        out += team_policy(policy_name(kind), RESOURCES[kind], variables, checks, match)
    return out
