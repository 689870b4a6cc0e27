"""The controller stack in install order: JobSet → Trainer → Kueue, each followed by its readiness gate.

Kueue goes last because it only enables an integration whose CRD (TrainJob, JobSet) already exists.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from trainer_infra.config.images import mirror_chart, mirror_image
from trainer_infra.config.stack import StackConfig
from trainer_infra.controllers.common import deep_merge
from trainer_infra.controllers.jobset import jobset_values
from trainer_infra.controllers.kueue import kueue_values
from trainer_infra.controllers.trainer import trainer_values
from trainer_infra.manifests import meta
from trainer_infra.manifests.runtime import minimal_runtime
from trainer_infra.plan.model import Component, HelmRelease, ManagedObject, PlanPart, ReadinessGate
from trainer_infra.storage.data_cache import data_cache_values
from trainer_infra.versions import MATRIX

INSTALL_ORDER: tuple[Component, ...] = ("jobset", "trainer", "kueue")
PROBE_NAME = "trainer-platform-webhook-probe"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"

CRDS: dict[Component, tuple[str, ...]] = {
    "jobset": ("jobsets.jobset.x-k8s.io",),
    "trainer": (
        "clustertrainingruntimes.trainer.kubeflow.org",
        "trainingruntimes.trainer.kubeflow.org",
        "trainjobs.trainer.kubeflow.org",
    ),
    "kueue": tuple(
        f"{k}.kueue.x-k8s.io"
        for k in (
            "clusterqueues",
            "cohorts",
            "localqueues",
            "resourceflavors",
            "topologies",
            "workloadpriorityclasses",
            "workloads",
        )
    ),
}

ValuesFn = Callable[[Any, str, "str | None"], dict[str, Any]]


def _probes(component: Component, namespace: str, mirror: str | None) -> tuple[dict[str, Any], ...]:
    """Small valid objects whose dry-run create passes only when the component's webhook answers."""
    image = mirror_image(PAUSE_IMAGE, mirror)
    pod = {"restartPolicy": "Never", "containers": [{"name": "probe", "image": image}]}
    if component == "jobset":
        return (
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "metadata": meta.metadata(PROBE_NAME, namespace),
                "spec": {
                    "replicatedJobs": [
                        {"name": "probe", "replicas": 1, "template": {"spec": {"template": {"spec": pod}}}}
                    ]
                },
            },
        )
    if component == "trainer":
        return (minimal_runtime(PROBE_NAME, {"image": image}),)
    return (
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": meta.metadata(PROBE_NAME),
            "spec": {},
        },
    )


def controller_plan(cfg: StackConfig) -> PlanPart:
    versions = cfg.components.resolved_versions()
    namespaces = cfg.components.resolved_namespaces()
    mirror = cfg.images.registry_mirror
    settings = {"jobset": cfg.components.jobset, "trainer": cfg.components.trainer, "kueue": cfg.components.kueue}
    values_fn: dict[Component, ValuesFn] = {
        "jobset": jobset_values,
        "trainer": trainer_values,
        # Fair sharing weights on teams only work with fair sharing on in Kueue's configuration.
        "kueue": partial(kueue_values, fair_sharing=any(t.fair_sharing_weight is not None for t in cfg.teams)),
    }
    releases: list[HelmRelease] = []
    gates: list[ReadinessGate] = []
    objects: list[ManagedObject] = []
    previous: tuple[str, ...] = ()
    for component in INSTALL_ORDER:
        version = versions[component]
        matrix = MATRIX.components[component]
        release = matrix.release(version)
        name = component
        releases.append(
            HelmRelease(
                name=name,
                component=component,
                chart=mirror_chart(matrix.chart, cfg.charts.repository_mirror),
                version=release.chart_version if release else version,
                namespace=namespaces[component],
                # Data cache values first, so the component's escape hatch still wins.
                values=deep_merge(
                    data_cache_values(cfg.data_cache, mirror) if component == "trainer" else {},
                    values_fn[component](settings[component], version, mirror),
                ),
                after=previous,
            )
        )
        gates.append(
            ReadinessGate(
                name=f"{component}-ready",
                component=component,
                release=name,
                crds=CRDS[component],
                probes=_probes(component, namespaces[component], mirror),
                version=version,
            )
        )
        objects.append(ManagedObject(meta.namespace(namespaces[component])))
        previous = (f"{component}-ready",)
    return PlanPart(tuple(releases), tuple(gates), tuple(objects))
