"""The data cache's admission rules, registered in `tenancy/admission/registry.py` like every other rule.

What a member's TrainJob gets into the initializers (the data cache's runs as its ServiceAccount, with rights a
member does not have: `deputies.py`) is judged where it enters, with the field path in the message; a pod
running as the cache's accounts must run the pinned images.

What the data cache's identities create in a team namespace must be what trainer's
`pkg/initializers/dataset/cache.py` (2.2.1, 2.3.0) creates with the platform's pinned settings, whoever asks. A
member who got code to run as the cache initializer (or who found a route this platform does not know of) still
gets only one cache cluster of the pinned image and size per TrainJob, a ClusterIP Service and a ServiceAccount
with the platform's cloud role:
- LeaderWorkerSet (only the cache initializer may create them in team namespaces; the rule holds for anyone):
  `<trainjob>-cache` controlled by the TrainJob `<trainjob>` (one per TrainJob), one replica of
  `dataCache.cluster.size` pods, no queue label or the team's (Kueue charges neither: see
  `deputies.CACHE_CLUSTER_CHARGE`), head and worker templates of one container each with the pinned image,
  command, env names and resources, running as `<trainjob>-cache`; no volumes, claim templates, init
  containers, security context, priority class, tolerations or nodeName.
- Service: from the cache initializer, `<trainjob>-cache-service` selecting its own head pod (every Service's
  rules: `tenancy/admission/services.py`).
- ServiceAccount (from the cache initializer only: a ServiceAccount has no spec, and the platform and the
  namespace's controllers create them too): `<trainjob>-cache`, the IRSA annotations cache.py sets, with the
  platform's role.
"""

from __future__ import annotations

from collections.abc import Callable

from trainer_infra.admission.cel import OBJECT_NAME, guarded, initializer_envs, lit
from trainer_infra.admission.model import AdmissionRule, AdmissionSettings, AdmittedKind, CacheDeputy
from trainer_infra.core.upstream import kubernetes, lws, trainer
from trainer_infra.core.upstream.kueue import QUEUE_LABEL
from trainer_infra.datacache.pinned import (
    CACHE_POD_ENV,
    CACHE_SUFFIX,
    PINNED_ENV,
    ROLE_ANNOTATION,
    SERVICE_SUFFIX,
    STS_ANNOTATION,
)

# -- what reaches the initializers --------------------------------------------------------------------

#: What a member may set on the initializers: their data settings (the names' home: core/upstream/trainer.py)
INITIALIZER_DATA_ENV = trainer.INITIALIZER_DATA_ENV


def _pinned(settings: AdmissionSettings) -> dict[str, str]:
    return dict(settings.data_cache.pinned) if settings.data_cache else {}


def _repeats_pinned(var: str, pinned: dict[str, str]) -> str:
    """CEL: env `var` has the pinned literal value (the API server drops an empty `value`)."""
    return f"!has({var}.valueFrom) && (has({var}.value) ? {var}.value : '') == {lit(pinned)}[{var}.name]"


def _env_allowed(var: str, settings: AdmissionSettings) -> str:
    pinned = _pinned(settings)
    ok = f"{var}.name in {lit(list(INITIALIZER_DATA_ENV))}"
    if pinned:
        ok += f" || ({var}.name in {lit(sorted(pinned))} && {_repeats_pinned(var, pinned)})"
    return ok


def _initializer_env(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    return initializer_envs(lambda env: f"{env}.all(e, {_env_allowed('e', settings)})")


def _initializer_env_message() -> str:
    return (
        "spec.initializer.dataset.env / spec.initializer.model.env may only set the initializers' data settings "
        f"({', '.join(INITIALIZER_DATA_ENV)}) and repeat the data cache's pinned {', '.join(PINNED_ENV)} "
        "with the platform's values (dataCache.cluster): "
        "initializers run the platform's image with the team's Hugging Face token, mount the team volume (the "
        "data cache's run as its ServiceAccount), and other variables (PYTHON*, LD_*, proxies and CA bundles "
        "such as HTTPS_PROXY or SSL_CERT_FILE, HF_HUB_*/HF_HOME, STORAGE_URI, GPU selection, cache sizes) "
        "change what they run, where they send the token, or how large. Put the data location in storageUri"
    )


INITIALIZER_ENV = AdmissionRule("initializerEnv", ("TrainJob",), _initializer_env_message(), _initializer_env)


def _on_deputy_runtime(settings: AdmissionSettings) -> str | None:
    if not settings.data_cache or not settings.data_cache.runtimes:
        return None
    ref = "object.spec.runtimeRef"
    return (
        f"({guarded(ref, ref + '.name')} && {ref}.name in {lit(list(settings.data_cache.runtimes))} && "
        f"(!has({ref}.kind) || {ref}.kind == 'ClusterTrainingRuntime'))"
    )


def _deputy_runtime(kind: AdmittedKind, settings: AdmissionSettings) -> str | None:
    deputy = _on_deputy_runtime(settings)
    if deputy is None:
        return None
    i = "object.spec.initializer"
    dataset = (
        f"(!has({i}.dataset) || ((!has({i}.dataset.storageUri) || {i}.dataset.storageUri.startsWith('cache://')) "
        f"&& !has({i}.dataset.secretRef)))"
    )
    return f"!{deputy} || !has({i}) || ({dataset} && (!has({i}.model) || !has({i}.model.secretRef)))"


DEPUTY_RUNTIME = AdmissionRule(
    "dataCacheInitializer",
    ("TrainJob",),
    "on a data cache runtime, spec.initializer.dataset.storageUri must be cache://<schema>/<table> and "
    "spec.initializer.*.secretRef is refused: the initializer runs as the data cache's ServiceAccount, and a "
    "Secret's variables or another storage scheme would change what it runs",
    _deputy_runtime,
)


#: The Job controller adds it to every container of an Indexed Job's pods (JobSet's jobs are Indexed):
#: kubernetes pkg/controller/job/indexed_job_utils.go, from the pod's label (PodIndexLabel) or annotation.
COMPLETION_INDEX = "JOB_COMPLETION_INDEX"
_INDEX_FIELDS = (
    f"metadata.labels['{kubernetes.JOB_COMPLETION_INDEX}']",
    f"metadata.annotations['{kubernetes.JOB_COMPLETION_INDEX}']",
)


def _completion_index(var: str) -> str:
    """CEL: env `var` is the completion index exactly as the Job controller writes it."""
    return (
        f"({var}.name == '{COMPLETION_INDEX}' && !has({var}.value) && has({var}.valueFrom) && "
        f"has({var}.valueFrom.fieldRef) && {var}.valueFrom.fieldRef.fieldPath in {lit(list(_INDEX_FIELDS))})"
    )


def _deputy_pods(kind: AdmittedKind, settings: AdmissionSettings) -> str | None:
    cache = settings.data_cache
    if cache is None:
        return None
    pinned = dict(cache.pinned)
    allowed_env = sorted({*cache.initializer_env, *INITIALIZER_DATA_ENV, trainer.STORAGE_URI_ENV})
    env_ok = (
        f"(e.name in {lit(allowed_env)} && (!(e.name in {lit(sorted(pinned))}) || "
        f"({_repeats_pinned('e', pinned)}))) || {_completion_index('e')}"
    )
    projected = (
        "!has(v.projected) || !has(v.projected.sources) || v.projected.sources.all(x, !has(x.downwardAPI) || "
        "!has(x.downwardAPI.items) || x.downwardAPI.items.all(i, has(i.fieldRef) && "
        "i.fieldRef.fieldPath == 'metadata.namespace'))"
    )
    initializer = (
        f"s.containers.all(c, c.image in {lit(list(cache.initializer_images))} && !has(c.envFrom) && "
        f"(!has(c.env) || c.env.all(e, {env_ok}))) && "
        f"(!has(s.volumes) || s.volumes.all(v, !has(v.downwardAPI) && ({projected})))"
    )
    cluster = f"s.containers.all(c, c.image == {lit(cache.cache_image)})"
    sa = "(has(s.serviceAccountName) ? s.serviceAccountName : '')"
    plain = "size(s.containers) == 1 && !has(s.initContainers) && !has(s.ephemeralContainers)"
    return (
        f"({sa} != {lit(cache.service_account)} || ({plain} && {initializer})) && "
        f"(!{sa}.endsWith('{CACHE_SUFFIX}') || ({plain} && {cluster}))"
    )


DEPUTY_PODS = AdmissionRule(
    "dataCachePods",
    ("Pod",),
    "a pod running as the data cache's ServiceAccounts must run the platform's pinned image (the dataset "
    "initializer, or the cache image for <trainjob>-cache) in one container, with the runtime's env and pinned "
    "values only and no downward API volume: these accounts have rights members do not",
    _deputy_pods,
    per_pod=True,
)


# -- what the cache initializer creates -----------------------------------------------------------------


def as_account(service_account: str) -> str:
    """CEL: the request comes from `service_account` of the request's namespace."""
    return f"request.userInfo.username == 'system:serviceaccount:' + request.namespace + ':{service_account}'"


def _with_cache(settings: AdmissionSettings) -> bool:
    return settings.data_cache is not None


def _initializer_requests(settings: AdmissionSettings) -> tuple[str, str]:
    assert settings.data_cache is not None  # the kind applies only with the data cache
    return ("by-the-cache-initializer", as_account(settings.data_cache.service_account))


_LWT = "object.spec.leaderWorkerTemplate"
#: the LeaderWorkerSet's pod templates (`variables.templates`)
TEMPLATES = (
    f"has({_LWT}.workerTemplate.spec) ? [{_LWT}.workerTemplate] + "
    f"(has({_LWT}.leaderTemplate) && has({_LWT}.leaderTemplate.spec) ? [{_LWT}.leaderTemplate] : []) : []"
)
LEADER_WORKER_SET = AdmittedKind(
    "LeaderWorkerSet",
    lws.GROUP,
    "*",
    "leaderworkersets",
    ("CREATE", "UPDATE"),
    specs=None,
    variables=(("templates", TEMPLATES),),
    applies=_with_cache,
)
#: only the cache initializer's requests are judged: a ServiceAccount has no spec, and the platform and the
#: namespace's controllers create them too
SERVICE_ACCOUNT = AdmittedKind(
    "ServiceAccount",
    "",
    "v1",
    "serviceaccounts",
    ("CREATE", "UPDATE"),
    specs=None,
    applies=_with_cache,
    match=_initializer_requests,
)


def _cache_rule(
    name: str,
    kind: str,
    message: str | Callable[[CacheDeputy], str],
    expression: Callable[[CacheDeputy, AdmissionSettings], str],
) -> AdmissionRule:
    """A rule that exists only with the data cache, from its deputy's facts."""

    def cel(admitted: AdmittedKind, settings: AdmissionSettings) -> str | None:
        return None if settings.data_cache is None else expression(settings.data_cache, settings)

    def text(settings: AdmissionSettings) -> str:
        if isinstance(message, str):
            return message
        return message(settings.data_cache) if settings.data_cache is not None else ""

    return AdmissionRule(name, (kind,), message if isinstance(message, str) else text, cel)


def _resources(c: str, field: str, cpu: str, mem: str) -> str:
    r = f"{c}.resources.{field}"
    return (
        f"has({r}) && {r}.all(k, k in ['cpu', 'memory']) && 'cpu' in {r} && 'memory' in {r} && "
        f"string({r}['cpu']) == {lit(cpu)} && string({r}['memory']) == {lit(mem)}"
    )


def _shaped(role: str, cpu: str, mem: str) -> str:
    c = "t.spec.containers[0]"
    return (
        f"({c}.name == '{role}' && has({c}.command) && {c}.command == ['{role}'] && has({c}.resources) && "
        f"({_resources(c, 'limits', cpu, mem)}) && ({_resources(c, 'requests', cpu, mem)}))"
    )


_WHAT = "only the data cache creates LeaderWorkerSets in team namespaces, as trainer's cache.py does"
LWS_NAME = _cache_rule(
    "dataCacheClusterName",
    "LeaderWorkerSet",
    f"metadata.name must be <trainjob>{CACHE_SUFFIX}: {_WHAT}",
    lambda cache, settings: f"{OBJECT_NAME}.endsWith('{CACHE_SUFFIX}')",
)


def _owner(cache: CacheDeputy, settings: AdmissionSettings) -> str:
    labels = "object.metadata.labels"
    return (
        f"(!has({labels}) || !('{QUEUE_LABEL}' in {labels}) || {labels}['{QUEUE_LABEL}'] in variables.team.queues)"
        " && has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(o, "
        f"o.apiVersion.startsWith('{trainer.GROUP}/') && o.kind == 'TrainJob' && has(o.controller) && "
        f"o.controller && o.name + '{CACHE_SUFFIX}' == {OBJECT_NAME})"
    )


LWS_OWNER = _cache_rule(
    "dataCacheClusterOwner",
    "LeaderWorkerSet",
    f"metadata.ownerReferences must name its TrainJob <trainjob> as controller (one cache cluster per "
    f"TrainJob, as cache.py creates it) and metadata.labels[{QUEUE_LABEL}], if set, your team's queue "
    "({queues})",
    _owner,
)
LWS_SIZE = _cache_rule(
    "dataCacheClusterSize",
    "LeaderWorkerSet",
    lambda cache: (
        f"spec.replicas must be 1 and spec.leaderWorkerTemplate.size at most {cache.size} "
        "(dataCache.cluster.size), without volumeClaimTemplates: the platform sizes the cache cluster"
    ),
    lambda cache, settings: (
        f"(!has(object.spec.replicas) || object.spec.replicas == 1) && "
        f"(!has({_LWT}.size) || {_LWT}.size <= {cache.size}) && !has({_LWT}.volumeClaimTemplates)"
    ),
)


def _containers(cache: CacheDeputy, settings: AdmissionSettings) -> str:
    (head_cpu, head_mem), (worker_cpu, worker_mem) = cache.head, cache.worker
    c0 = "t.spec.containers[0]"
    container = (
        f"size(t.spec.containers) == 1 && has({c0}.image) && {c0}.image == {lit(cache.cache_image)} && "
        f"({_shaped('head', head_cpu, head_mem)} || {_shaped('worker', worker_cpu, worker_mem)}) && "
        f"!has({c0}.volumeMounts) && !has({c0}.envFrom) && !has({c0}.securityContext) && "
        f"!has({c0}.resources.claims) && "
        f"(!has({c0}.env) || {c0}.env.all(e, e.name in {lit(list(CACHE_POD_ENV))}))"
    )
    return f"variables.templates.all(t, {container})"


def _containers_message(cache: CacheDeputy) -> str:
    (head_cpu, head_mem), (worker_cpu, worker_mem) = cache.head, cache.worker
    return (
        "spec.leaderWorkerTemplate.{leader,worker}Template must run one container, head or worker, with the "
        f"pinned cache image {cache.cache_image}, its command, the resources of dataCache.cluster "
        f"(head {head_cpu}/{head_mem}, worker {worker_cpu}/{worker_mem}), env {', '.join(CACHE_POD_ENV)} "
        "only and no mounts or securityContext: what trainer's cache initializer creates"
    )


LWS_CONTAINERS = _cache_rule("dataCacheClusterContainers", "LeaderWorkerSet", _containers_message, _containers)
_POD_EXTRAS = (
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


def _pods(cache: CacheDeputy, settings: AdmissionSettings) -> str:
    no_extras = " && ".join(f"!has(t.spec.{f})" for f in _POD_EXTRAS)
    priority = (
        f"(!has(t.spec.priorityClassName) || t.spec.priorityClassName in {lit(sorted(settings.priority_classes))})"
    )
    sa = f"has(t.spec.serviceAccountName) && t.spec.serviceAccountName == {OBJECT_NAME}"
    return f"variables.templates.all(t, {no_extras} && {priority} && {sa})"


LWS_PODS = _cache_rule(
    "dataCacheClusterPods",
    "LeaderWorkerSet",
    "spec.leaderWorkerTemplate: pods must run as the LeaderWorkerSet's own ServiceAccount "
    f"(<trainjob>{CACHE_SUFFIX}), without volumes, init containers, securityContext, nodeName, "
    "tolerations, host namespaces, runtimeClassName, schedulerName, resourceClaims or a priority class "
    "the platform does not allow",
    _pods,
)


def _service(cache: CacheDeputy, settings: AdmissionSettings) -> str:
    s = "object.spec"
    head = f"{OBJECT_NAME}.substring(0, size({OBJECT_NAME}) - {len(SERVICE_SUFFIX) - len(CACHE_SUFFIX)}) + '-head'"
    return (
        f"!({as_account(cache.service_account)}) || ({OBJECT_NAME}.endsWith('{SERVICE_SUFFIX}') && "
        f"has({s}.selector) && {s}.selector == {{'app': {head}}})"
    )


CACHE_SERVICE = _cache_rule(
    "dataCacheService",
    "Service",
    f"the data cache's Service must be <trainjob>{SERVICE_SUFFIX} selecting its own head pod "
    f"(app: <trainjob>{CACHE_SUFFIX}-head), as cache.py creates it",
    _service,
)


def _service_account(cache: CacheDeputy, settings: AdmissionSettings) -> str:
    ann = "object.metadata.annotations"
    allowed = {ROLE_ANNOTATION: cache.iam_role, STS_ANNOTATION: "true"}
    annotations = f"(!has({ann}) || {ann}.all(k, k in {lit(sorted(allowed))} && {ann}[k] == {lit(allowed)}[k]))"
    secrets = "!has(object.secrets) && !has(object.imagePullSecrets)"
    return f"{OBJECT_NAME}.endsWith('{CACHE_SUFFIX}') && {annotations} && {secrets}"


CACHE_SERVICE_ACCOUNT = _cache_rule(
    "dataCacheServiceAccount",
    "ServiceAccount",
    lambda cache: (
        f"the data cache's ServiceAccount must be <trainjob>{CACHE_SUFFIX} with the platform's role "
        f"({ROLE_ANNOTATION}: {cache.iam_role or 'empty'}, dataCache.cluster.iamRole) and no secrets"
    ),
    _service_account,
)
#: the kinds only the data cache's identities create (Service is every team's: `tenancy/admission/kinds.py`)
KINDS = (LEADER_WORKER_SET, SERVICE_ACCOUNT)
#: what the cache initializer creates, in policy order (after the rules on the TrainJob and its pods)
CREATED = (LWS_NAME, LWS_OWNER, LWS_SIZE, LWS_CONTAINERS, LWS_PODS, CACHE_SERVICE, CACHE_SERVICE_ACCOUNT)
