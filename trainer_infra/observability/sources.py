"""Where each metric the rules and dashboards read comes from, when it is not one of our controllers.

Controller metrics (Kueue, JobSet, Trainer/controller-runtime) are not listed: the e2e suite proves
them by scraping the real controllers. What is listed here cannot be scraped in the sandbox; it is
named with its exporter and the labels we rely on, and where the exporter's source is on the Go
module proxy the e2e suite checks the metric name is defined in the pinned release.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainer_infra.core.upstream import kube_state_metrics

#: Labels Prometheus adds to every series of a ServiceMonitor target (Prometheus Operator defaults).
TARGET_LABELS = frozenset({"job", "namespace", "instance", "service", "endpoint", "pod", "container"})


@dataclass(frozen=True)
class Exporter:
    name: str
    module: str | None = None  # Go module whose source defines the metric names
    version: str | None = None
    source_dir: str | None = None  # folder inside the module with the metric definitions


PROMETHEUS = Exporter("Prometheus (scrape health of each target)")
KSM = Exporter("kube-state-metrics", kube_state_metrics.MODULE, "2.15.0", "internal/store")
CADVISOR = Exporter("kubelet cAdvisor", "github.com/google/cadvisor", "0.53.0", "metrics")
DCGM = Exporter("NVIDIA dcgm-exporter (not on the Go module proxy: unchecked)")

#: metric → (exporter, label names used). `label_*` stands for kube-state-metrics' allow-listed labels.
EXTERNAL: dict[str, tuple[Exporter, frozenset[str]]] = {
    "up": (PROMETHEUS, frozenset({"job", "namespace", "instance"})),
    "kube_node_status_condition": (KSM, frozenset({"node", "condition", "status"})),
    "kube_node_labels": (KSM, frozenset({"node", "label_*"})),
    "kube_pod_status_phase": (KSM, frozenset({"namespace", "pod", "phase"})),
    "kube_pod_container_status_restarts_total": (KSM, frozenset({"namespace", "pod", "container"})),
    "container_cpu_usage_seconds_total": (CADVISOR, frozenset({"namespace", "pod", "container"})),
    "container_memory_working_set_bytes": (CADVISOR, frozenset({"namespace", "pod", "container"})),
    "DCGM_FI_DEV_GPU_UTIL": (DCGM, frozenset({"exported_namespace", "exported_pod"})),
}


def external_label_ok(metric: str, label: str) -> bool:
    """Is `label` one we documented for the external `metric`?"""
    _, labels = EXTERNAL[metric]
    return label in labels or ("label_*" in labels and label.startswith("label_"))
