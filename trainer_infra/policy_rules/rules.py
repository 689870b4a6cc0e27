"""The rules. Each is a pure function over subjects that yields (subject, path, message) findings;
`RULES` lists them in the order they are reported. A new rule is a function plus one line in RULES."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from trainer_infra.core.upstream.kubernetes import NAMESPACE_NAME_LABEL
from trainer_infra.core.upstream.kueue import PRIORITY_LABEL
from trainer_infra.manifests.meta import DECOMMISSIONED, LEAVING, TEAM_LABEL
from trainer_infra.manifests.pod_rules import pod_spec_problems
from trainer_infra.manifests.pod_walk import MAIN_LISTS, containers
from trainer_infra.manifests.runtime import (
    FRAMEWORK_LABEL,
    accelerators_of,
    get_in,
    is_accelerator,
    pod_specs,
    tolerates,
    unpinned,
)
from trainer_infra.policy_rules.model import SECRET_MARK, Finding, Rule, Subject, Violation

CATALOG_VERSION_LABEL = "trainer-platform.io/catalog-version"
RUNTIME_KINDS = ("ClusterTrainingRuntime", "TrainingRuntime")
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet")
# Where each controller chart takes the manager's resources (values.yaml of the pinned charts).
CONTROLLER_RESOURCES: dict[str, tuple[str, ...]] = {
    "jobset": ("controller", "resources"),
    "kubeflow-trainer": ("manager", "resources"),
    "kueue": ("controllerManager", "manager", "resources"),
}


def _walk(value: Any, path: str = "") -> Iterator[tuple[str, str, Any]]:
    """Every (path, key, value) under a mapping, depth first, in key order."""
    if isinstance(value, Mapping):
        for key in sorted(value, key=str):
            sub = f"{path}.{key}" if path else str(key)
            yield sub, str(key), value[key]
            yield from _walk(value[key], sub)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _walk(item, f"{path}[{i}]")


def _labels(props: Mapping[str, Any]) -> Mapping[str, Any]:
    return (props.get("metadata") or {}).get("labels") or {}


# --- images pinned ---------------------------------------------------------------------------------


def _images_pinned(subjects: Sequence[Subject]) -> Iterable[Finding]:
    """Container images anywhere in a manifest, and image settings in chart values: `image: repo:tag`
    strings and `{repository, tag}` mappings (keys `image` or `…Image`). A values mapping without a
    tag falls back to the chart's appVersion, which the chart version pins, so only an explicit
    `latest` or empty tag is refused there."""
    for s in subjects:
        for path, key, value in _walk(s.props):
            if key != "image" and not key.endswith("Image"):
                continue
            if isinstance(value, str):
                problem = unpinned(value)
                if problem:
                    yield s, path, problem
            elif isinstance(value, Mapping) and "tag" in value and not value.get("digest"):
                tag = str(value.get("tag") or "")
                if tag in ("", "latest"):
                    yield s, f"{path}.tag", f"image {value.get('repository', '')!r} tag {tag!r} is not pinned"


# --- accelerator runtimes tolerate the taints of a pool that offers their accelerator -----------------


def _flavor_taints(subjects: Sequence[Subject]) -> dict[str, list[list[Mapping[str, Any]]]]:
    """accelerator resource → the tolerations of each ResourceFlavor a ClusterQueue offers it with (a
    flavor's tolerations are its pool's taints)."""
    flavors = {
        get_in(s.props, "metadata", "name"): get_in(s.props, "spec", "tolerations") or []
        for s in subjects
        if s.kind == "ResourceFlavor"
    }
    out: dict[str, list[list[Mapping[str, Any]]]] = {}
    for s in subjects:
        if s.kind != "ClusterQueue":
            continue
        for group in get_in(s.props, "spec", "resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                for res in flavor.get("resources") or []:
                    name = str(res.get("name", ""))
                    if is_accelerator(name) and flavor.get("name") in flavors:
                        out.setdefault(name, []).append(list(flavors[flavor["name"]]))
    return out


def _covers(pod: Mapping[str, Any], taints: Sequence[Mapping[str, Any]]) -> bool:
    tolerations = pod.get("tolerations") or []
    return all(
        tolerates(tolerations, str(t.get("key")), str(t.get("effect") or "NoSchedule"))
        for t in taints
        if t.get("key") and t.get("effect") in ("NoSchedule", "NoExecute", None)
    )


def _gpu_runtimes_tolerate(subjects: Sequence[Subject]) -> Iterable[Finding]:
    """A runtime job that asks for an accelerator (any vendor's extended resource) must tolerate every taint
    of some pool that offers it (a ResourceFlavor a ClusterQueue covers it with); with no such queue, the
    vendors' convention: a taint keyed by the resource. Otherwise its pods stay Pending."""
    offered = _flavor_taints(subjects)
    for s in subjects:
        if s.kind not in RUNTIME_KINDS:
            continue
        for path, pod in pod_specs(s.props):
            for resource in sorted(accelerators_of(pod)):
                pools = offered.get(resource)
                if pools and not any(_covers(pod, taints) for taints in pools):
                    yield s, f"{path}.tolerations", f"uses {resource} but tolerates the taints of no pool offering it"
                elif not pools and not tolerates(pod.get("tolerations") or [], resource):
                    yield s, f"{path}.tolerations", f"uses {resource} but does not tolerate the {resource} taint"


# --- ClusterQueues select namespaces ----------------------------------------------------------------


def _clusterqueue_selector(subjects: Sequence[Subject]) -> Iterable[Finding]:
    """Kueue reads a missing namespaceSelector as 'no namespace may submit': a silent dead queue."""
    for s in subjects:
        if s.kind == "ClusterQueue" and get_in(s.props, "spec", "namespaceSelector") is None:
            yield s, "spec.namespaceSelector", "ClusterQueue has no namespaceSelector (no namespace can use it)"


# --- data is protected --------------------------------------------------------------------------------


def _namespace_of(s: Subject) -> str | None:
    ns = get_in(s.props, "metadata", "namespace")
    return str(ns) if ns else None


def team_namespaces(subjects: Sequence[Subject]) -> set[str]:
    """Namespaces holding user work: labelled as a team's, or where the program puts a LocalQueue
    (users submit TrainJobs there) or a PersistentVolumeClaim (users keep data there)."""
    found = {
        str(get_in(s.props, "metadata", "name"))
        for s in subjects
        if s.kind == "Namespace" and TEAM_LABEL in _labels(s.props)
    }
    found |= {ns for s in subjects if s.kind in ("LocalQueue", "PersistentVolumeClaim") and (ns := _namespace_of(s))}
    return found


def _data_protected(subjects: Sequence[Subject]) -> Iterable[Finding]:
    """Deleting a CRD deletes every object of its kind; deleting a team namespace or PVC deletes the
    team's jobs and data. Pulumi's `protect` makes any delete or replace fail until it is lifted."""
    teams = team_namespaces(subjects)
    for s in subjects:
        kind = s.kind
        if s.is_chart:
            crd = s.child_policy.get("CustomResourceDefinition")
            if crd is not None and not crd.get("protect") and not crd.get("leavingFleet"):
                yield s, "childPolicy.CustomResourceDefinition", "the chart's CRDs are not protected"
            continue
        if kind == "CustomResourceDefinition" or kind == "PersistentVolumeClaim":
            what = kind
        elif kind == "Namespace" and str(get_in(s.props, "metadata", "name")) in teams:
            what = "team Namespace"
        else:
            continue
        # dropped on purpose: a decommissioned team's, or retained by a worker leaving the fleet (stack/fleet_plans.py)
        marks = (get_in(s.props, "metadata", "annotations", mark) for mark in (DECOMMISSIONED, LEAVING))
        if not s.protect and "true" not in marks:
            yield s, "", f"{what} is not protected (resource option protect)"


# --- no plaintext secrets ---------------------------------------------------------------------------


def _no_plaintext_secrets(subjects: Sequence[Subject]) -> Iterable[Finding]:
    """A Secret's values must be Pulumi secrets, or they sit in plain text in the state and in every
    preview."""
    for s in subjects:
        if s.kind != "Secret":
            continue
        for field in ("data", "stringData"):
            values = s.props.get(field) or {}
            if values == SECRET_MARK:  # the whole map is a Pulumi secret (how the engine hands Secret data)
                continue
            for key, value in sorted(values.items()):
                if value != SECRET_MARK:
                    yield s, f"{field}.{key}", "value is plain text in the program"


# --- controllers request resources ------------------------------------------------------------------


def _missing_requests(resources: Any) -> list[str]:
    requests = get_in(resources, "requests") or {}
    return [r for r in ("cpu", "memory") if not requests.get(r)]


def _controllers_request(subjects: Sequence[Subject]) -> Iterable[Finding]:
    """Without cpu and memory requests a controller is BestEffort: first evicted under node pressure,
    and its webhook then blocks every TrainJob. Checked in chart values (offline, the chart's own
    objects are not rendered) and on every Deployment/StatefulSet/DaemonSet."""
    for s in subjects:
        if s.is_chart:
            chart = str(s.props.get("chart", "")).rstrip("/").rsplit("/", 1)[-1]
            keys = CONTROLLER_RESOURCES.get(chart)
            if keys is None:
                continue
            missing = _missing_requests(get_in(s.props.get("values") or {}, *keys))
            if missing:
                yield s, "values." + ".".join(keys), f"controller has no {' / '.join(missing)} request"
        elif s.kind in WORKLOAD_KINDS:
            pod = get_in(s.props, "spec", "template", "spec") or {}
            for at, c in containers(pod, MAIN_LISTS):  # init containers run before the controller serves
                missing = _missing_requests(c.get("resources"))
                if missing:
                    where = f"spec.template.spec.{at}.resources.requests"
                    yield s, where, f"container {c.get('name')!r} has no {' / '.join(missing)} request"


# --- runtimes carry their labels --------------------------------------------------------------------


def _runtime_labels(subjects: Sequence[Subject]) -> Iterable[Finding]:
    """The SDK finds runtimes by the framework label; the catalog version says which catalog a
    cluster runs (and what a rollback goes back to)."""
    for s in subjects:
        if s.kind not in RUNTIME_KINDS:
            continue
        labels = _labels(s.props)
        for label in (FRAMEWORK_LABEL, CATALOG_VERSION_LABEL):
            if not labels.get(label):
                yield s, f"metadata.labels.{label}", f"runtime has no {label} label"


# --- runtimes stay off the node ---------------------------------------------------------------------


def _runtimes_stay_off_the_node(subjects: Sequence[Subject]) -> Iterable[Finding]:
    """Runtimes run in team namespaces: host namespaces, privileged containers, added capabilities, hostPath
    (any volume but claims and pod-local ones) or a priority class the stack does not create reach beyond
    the team. The admission policies refuse such pods anyway; this stops the program that would serve them."""
    own_priority_classes = {str(get_in(s.props, "metadata", "name")) for s in subjects if s.kind == "PriorityClass"}
    for s in subjects:
        if s.kind not in RUNTIME_KINDS:
            continue
        for path, pod in pod_specs(s.props):
            for problem in pod_spec_problems(pod, own_priority_classes):
                yield s, path, problem


RULES: tuple[Rule, ...] = (
    Rule(
        "images-pinned",
        "Images are pinned: a tag other than latest, or a digest (manifests and chart values).",
        "write the image as registry/name:vX.Y.Z (or @sha256:…)",
        "resource",
        _images_pinned,
    ),
    Rule(
        "gpu-runtimes-tolerate-gpu-taint",
        "Runtimes that use an accelerator tolerate the taints of a node pool that offers it.",
        "add the pool's taints as tolerations (the platform's placement injection does), or for an accelerator "
        "no pool declares a toleration {key: <resource>, operator: Exists, effect: NoSchedule}",
        "resource",
        _gpu_runtimes_tolerate,
    ),
    Rule(
        "clusterqueue-namespace-selector",
        "Every ClusterQueue has a namespaceSelector.",
        f"select the team namespace, e.g. matchLabels {{{NAMESPACE_NAME_LABEL}: <team namespace>}}",
        "resource",
        _clusterqueue_selector,
    ),
    Rule(
        "data-is-protected",
        "CRDs, team namespaces and PersistentVolumeClaims are protected from deletion and replacement.",
        "keep protect on; to remove on purpose set allowDataLoss: true (README 'Never lose data')",
        "stack",
        _data_protected,
    ),
    Rule(
        "no-plaintext-secrets",
        "Secrets carry no plain-text data in the program.",
        "read the value from a Pulumi secret (pulumi config set --secret) so it is wrapped as a secret",
        "resource",
        _no_plaintext_secrets,
    ),
    Rule(
        "controllers-request-resources",
        "Controllers request cpu and memory.",
        "set components.<name>.resources.requests (cpu and memory)",
        "resource",
        _controllers_request,
    ),
    Rule(
        "runtimes-stay-off-the-node",
        "Runtimes use no host namespaces, privileged containers, added capabilities, host or network volumes, "
        "or priority classes the stack does not create.",
        f"remove the field; mount the team claim for data; use Kueue's {PRIORITY_LABEL} for priority",
        "resource",
        _runtimes_stay_off_the_node,
    ),
    Rule(
        "runtime-labels",
        f"Runtimes carry the {FRAMEWORK_LABEL} and {CATALOG_VERSION_LABEL} labels.",
        "label the runtime with its framework (torch, deepspeed, …) and the catalog version",
        "resource",
        _runtime_labels,
    ),
)


def check(subjects: Sequence[Subject], advisory: Iterable[str] = ()) -> list[Violation]:
    """Every rule over every subject. Rules named in `advisory` report without failing."""
    soft = set(advisory)
    unknown = soft - {r.name for r in RULES}
    if unknown:
        raise ValueError(f"unknown policy rules: {sorted(unknown)}")
    return [v for rule in RULES for v in rule.check(subjects, rule.name in soft)]
