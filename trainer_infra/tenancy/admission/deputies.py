"""Admission rules of issue #27: no member input reaches a deputy's pod beyond an allow-list that cannot change
what runs, no pod selects GPUs by env, and every pod of a team namespace (whoever creates it) runs as an
allowed account, in the queue, at an allowed priority (`tenancy/deputies.py` is the inventory they follow).

Member input is judged where it enters (the TrainJob), with the field path in the message; the Pod rules are the
backstop on what the controllers create from it (the data cache's pods run only the pinned images).
"""

from __future__ import annotations

from trainer_infra.manifests.device_env import DEVICE_LIST_DIR, GPU_ENV_NAMES, GPU_ENV_PREFIXES
from trainer_infra.storage.data_cache import CACHE_SUFFIX
from trainer_infra.tenancy.admission.cel import guarded, lit
from trainer_infra.tenancy.admission.model import AdmissionRule, AdmissionSettings, AdmittedKind
from trainer_infra.tenancy.deputies import INITIALIZER_JOBS

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
#: What Trainer's upstream initializers read besides STORAGE_URI (pkg/initializers/types/types.py, 2.2.1/2.3.0):
#: where the data is and how to authenticate to it. Neither can change the initializer's code or image.
INITIALIZER_DATA_ENV = (
    "ACCESS_KEY_ID",
    "ACCESS_TOKEN",
    "ENDPOINT",
    "IGNORE_PATTERNS",
    "METADATA_LOC",
    "REGION",
    "ROLE_ARN",
    "SECRET_ACCESS_KEY",
)
#: Label and annotation prefixes the controllers own: Trainer's step label decides which job gets a member's
#: image and which identity runs it; JobSet's, Kueue's and LWS's decide placement, queue and ownership.
CONTROLLER_PREFIXES = (
    "trainer.kubeflow.org/",
    "jobset.sigs.k8s.io/",
    "kueue.x-k8s.io/",
    "leaderworkerset.sigs.k8s.io/",
)
#: Kueue's scheduling annotations a runtime patch may still set (topology requests stay within the quota).
KUEUE_ANNOTATIONS = ("kueue.x-k8s.io/podset-preferred-topology", "kueue.x-k8s.io/podset-required-topology")
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"


def device_env_ok(name: str) -> str:
    """CEL: env name `name` selects no GPU by itself."""
    prefixes = " || ".join(f"{name}.startsWith('{p}')" for p in GPU_ENV_PREFIXES)
    return f"!({prefixes} || {name} in {lit(list(GPU_ENV_NAMES))})"


# -- GPU visibility ----------------------------------------------------------------------------------


def _device_env(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    parts = []
    for f in kind.pod.containers:
        checks = [
            f"(!has(c.env) || c.env.all(e, {device_env_ok('e.name')}))",
            f"(!has(c.volumeMounts) || c.volumeMounts.all(m, !m.mountPath.contains('{DEVICE_LIST_DIR}')))",
        ]
        if kind.name != "TrainJob":  # a runtime patch's containers have no envFrom
            checks.append(f"(!has(c.envFrom) || c.envFrom.all(x, !has(x.prefix) || {device_env_ok('x.prefix')}))")
        parts.append(f"(!has(s.{f}) || s.{f}.all(c, {' && '.join(checks)}))")
    return " && ".join(parts)


_DEVICE_MESSAGE = (
    f"sets a GPU-selection variable ({', '.join(p + '*' for p in GPU_ENV_PREFIXES)}, {', '.join(GPU_ENV_NAMES)}) "
    "in {where}, or mounts a volume under /var/run/nvidia-container-devices: container runtimes that honour "
    "them hand the pod GPUs Kueue never charged, other teams' included. "
    "Request GPUs with spec.trainer.resourcesPerNode (CUDA_VISIBLE_DEVICES, which only narrows the GPUs a pod "
    "was given, stays allowed)"
)
DEVICE_ENV = AdmissionRule(
    "deviceEnv",
    ("Pod", "JobSet", "TrainingRuntime", "TrainJob"),
    _DEVICE_MESSAGE.replace("{where}", "a container's env or envFrom prefix (runtimePatches[].…containers[].env)"),
    _device_env,
    per_pod=True,
)


def _trainer_env(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    return (
        "!has(object.spec.trainer) || !has(object.spec.trainer.env) || "
        f"object.spec.trainer.env.all(e, {device_env_ok('e.name')})"
    )


def _no_resource_claims(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    containers = " && ".join(
        f"(!has(s.{f}) || s.{f}.all(c, !has(c.resources) || !has(c.resources.claims)))"
        for f in kind.pod.containers
        if f != "ephemeralContainers"  # they have no resources
    )
    return f"!has(s.resourceClaims) && {containers}"


RESOURCE_CLAIMS = AdmissionRule(
    "resourceClaims",
    ("Pod", "JobSet", "TrainingRuntime"),
    "requests devices through resourceClaims (Dynamic Resource Allocation): Kueue does not charge them here, so "
    "the GPUs would be your team's for free. Request GPUs as resources (nvidia.com/gpu)",
    _no_resource_claims,
    per_pod=True,
)


TRAINER_DEVICE_ENV = AdmissionRule(
    "trainerDeviceEnv", ("TrainJob",), _DEVICE_MESSAGE.replace("{where}", "spec.trainer.env"), _trainer_env
)


# -- what reaches the initializers (the data cache's runs as its ServiceAccount) -----------------------


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
    i = "object.spec.initializer"
    per = [
        f"(!has({i}.{step}) || !has({i}.{step}.env) || {i}.{step}.env.all(e, {_env_allowed('e', settings)}))"
        for step in ("dataset", "model")
    ]
    return f"!has({i}) || ({' && '.join(per)})"


def _initializer_env_message() -> str:
    return (
        "spec.initializer.dataset.env / spec.initializer.model.env may only set the initializers' data settings "
        f"({', '.join(INITIALIZER_DATA_ENV)}) and repeat the data cache's pinned CACHE_IMAGE, CLUSTER_SIZE, "
        "HEAD_CPU, HEAD_MEM, WORKER_CPU, WORKER_MEM, IAM_ROLE with the platform's values (dataCache.cluster): "
        "initializers run the platform's image, the data cache's as its ServiceAccount, and other variables "
        "(PYTHON*, LD_*, STORAGE_URI, GPU selection, cache sizes) change what it runs, where or how large. "
        "Put the data location in storageUri"
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


#: The manager of the runtime patch Kueue writes when it admits a TrainJob (Kueue's
#: pkg/controller/jobs/trainjob: `runtimePatchManagerName`): per podset its labels, annotations,
#: nodeSelector, tolerations and scheduling gates, initializer jobs included.
KUEUE_PATCH_MANAGER = "kueue.x-k8s.io/manager"


def _kueues_own(settings: AdmissionSettings) -> str:
    """CEL: patch `p` is Kueue's, written by Kueue itself (a member's patch under Kueue's name is judged)."""
    if not settings.kueue_identity:
        return "false"
    return (
        f"(has(p.manager) && p.manager == '{KUEUE_PATCH_MANAGER}' && "
        f"request.userInfo.username == '{settings.kueue_identity}')"
    )


def _patches_all(settings: AdmissionSettings, body: str) -> str:
    """CEL: `body` holds for every runtime patch `p` but the one Kueue writes."""
    return f"!has(object.spec.runtimePatches) || object.spec.runtimePatches.all(p, {_kueues_own(settings)} || {body})"


def _patch_jobs_all(settings: AdmissionSettings, body: str) -> str:
    """CEL: `body` holds for every replicated job patch `j` of every runtime patch but Kueue's."""
    p = "p.trainingRuntimeSpec"
    jobs = guarded(p, p + ".template", p + ".template.spec", p + ".template.spec.replicatedJobs")
    return _patches_all(settings, f"!({jobs}) || {p}.template.spec.replicatedJobs.all(j, {body})")


def _meta_ok(x: str) -> str:
    """CEL: `x.metadata` carries no controller label or annotation and no unconfined AppArmor annotation."""
    owned = " || ".join(f"k.startsWith('{p}')" for p in CONTROLLER_PREFIXES)
    labels = owned
    value = f"{x}.metadata.annotations[k]"
    confined = f"{value} == 'runtime/default' || {value}.startsWith('localhost/')"
    apparmor = f"(k.startsWith('{APPARMOR_ANNOTATION}') && !({confined}))"
    annotations = f"(({owned}) && !(k in {lit(list(KUEUE_ANNOTATIONS))})) || {apparmor}"
    return (
        f"(!has({x}.metadata) || ((!has({x}.metadata.labels) || !{x}.metadata.labels.exists(k, {labels})) && "
        f"(!has({x}.metadata.annotations) || !{x}.metadata.annotations.exists(k, {annotations}))))"
    )


def _controller_labels(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    t = "p.trainingRuntimeSpec.template"
    top = _patches_all(settings, f"!({guarded('p.trainingRuntimeSpec', t)}) || {_meta_ok(t)}")
    jobs = _patch_jobs_all(
        settings,
        f"!has(j.template) || ({_meta_ok('j.template')} && "
        f"(!{guarded('j.template.spec', 'j.template.spec.template')} || {_meta_ok('j.template.spec.template')}))",
    )
    return f"({top}) && ({jobs})"


CONTROLLER_LABELS = AdmissionRule(
    "controllerLabels",
    ("TrainJob",),
    "a runtime patch sets a label or annotation the controllers own "
    f"({', '.join(p + '*' for p in CONTROLLER_PREFIXES)}), or an unconfined AppArmor annotation: Trainer's step "
    "label decides which job (and which ServiceAccount) runs spec.trainer's image, the others decide queue, "
    "placement and ownership. Leave them to the runtime; set your own labels under your own prefix",
    _controller_labels,
)


def _initializer_patches(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    names = sorted({*INITIALIZER_JOBS, *(settings.data_cache.jobs if settings.data_cache else ())})
    forbidden = (
        "serviceAccountName",
        "volumes",
        "initContainers",
        "containers",
        "imagePullSecrets",
        "securityContext",
        "schedulingGates",
    )
    only = " && ".join(f"!has(j.template.spec.template.spec.{f})" for f in forbidden)
    body = (
        f"!(j.name in {lit(names)}) || !has(j.template) || (!has(j.template.metadata) && "
        "(!has(j.template.spec) || !has(j.template.spec.template) || (!has(j.template.spec.template.metadata) && "
        f"(!has(j.template.spec.template.spec) || ({only})))))"
    )
    return _patch_jobs_all(settings, body)


INITIALIZER_PATCHES = AdmissionRule(
    "initializerPatches",
    ("TrainJob",),
    "a runtime patch of an initializer job (dataset-initializer, model-initializer) may set nodeSelector, "
    "affinity and tolerations only: containers, env, volumes, mounts, securityContext, metadata or a "
    "ServiceAccount there would change what the platform's initializer (the data cache's: as its ServiceAccount) "
    "runs. Patch your trainer job (node) instead",
    _initializer_patches,
)


# -- every pod of a team namespace, whoever creates it --------------------------------------------------


def _pod_queue(kind: AdmittedKind, settings: AdmissionSettings) -> str | None:
    if not settings.kueue_identity:
        return None

    def owned(api: str, kind: str) -> str:
        return (
            "has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(o, "
            f"o.apiVersion == '{api}' && o.kind == '{kind}' && has(o.controller) && o.controller)"
        )

    label = f"object.metadata.labels['{QUEUE_LABEL}']"
    queued = (
        f"has(object.metadata.labels) && '{QUEUE_LABEL}' in object.metadata.labels && {label} in variables.team.queues"
    )
    allowed = f"({owned('batch/v1', 'Job')}) || ({queued})"
    if settings.data_cache:  # the cache cluster's pods (LWS → StatefulSet); dataCachePods pins their image
        sa = "(has(object.spec.serviceAccountName) ? object.spec.serviceAccountName : '')"
        allowed += f" || (({owned('apps/v1', 'StatefulSet')}) && {sa}.endsWith('{CACHE_SUFFIX}'))"
    return allowed


POD_QUEUE = AdmissionRule(
    "podQueue",
    ("Pod",),
    f"a pod in a team namespace runs only as part of a job (owned by a Job of a JobSet Kueue admitted) or with "
    f"the label {QUEUE_LABEL} naming your team's queue ({{queues}}), or as a data cache cluster's pod: other "
    "pods would run without being charged",
    _pod_queue,
)


#: The Job controller adds it to every container of an Indexed Job's pods (JobSet's jobs are Indexed):
#: kubernetes pkg/controller/job/indexed_job_utils.go, from the pod's label (PodIndexLabel) or annotation.
COMPLETION_INDEX = "JOB_COMPLETION_INDEX"
_INDEX_FIELDS = (
    "metadata.labels['batch.kubernetes.io/job-completion-index']",
    "metadata.annotations['batch.kubernetes.io/job-completion-index']",
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
    allowed_env = sorted({*cache.initializer_env, *INITIALIZER_DATA_ENV, "STORAGE_URI"})
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
