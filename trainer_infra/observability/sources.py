"""Where each metric the rules and dashboards read comes from, when it is not one of our controllers.

Controller metrics (Kueue, JobSet, Trainer/controller-runtime) are not listed: the e2e suite proves
them by scraping the real controllers. What is listed here cannot be scraped in the sandbox and is
named with the exporter and the labels we rely on, so a reviewer can check it against that
exporter's documentation (the README's wiring section says which versions).
"""

from __future__ import annotations

#: Labels Prometheus adds to every series of a ServiceMonitor target (Prometheus Operator defaults).
TARGET_LABELS = frozenset({"job", "namespace", "instance", "service", "endpoint", "pod", "container"})

#: metric → (exporter, label names used). `label_*` stands for kube-state-metrics' allow-listed labels.
EXTERNAL: dict[str, tuple[str, frozenset[str]]] = {
    "up": ("prometheus (scrape health of each target)", frozenset({"job", "namespace", "instance"})),
    "kube_node_status_condition": ("kube-state-metrics", frozenset({"node", "condition", "status"})),
    "kube_node_labels": (
        "kube-state-metrics (--metric-labels-allowlist=nodes=[<pool label>])",
        frozenset({"node", "label_*"}),
    ),
    "kube_pod_status_phase": ("kube-state-metrics", frozenset({"namespace", "pod", "phase"})),
    "kube_pod_container_status_restarts_total": ("kube-state-metrics", frozenset({"namespace", "pod", "container"})),
    "container_cpu_usage_seconds_total": ("kubelet cAdvisor", frozenset({"namespace", "pod", "container"})),
    "container_memory_working_set_bytes": ("kubelet cAdvisor", frozenset({"namespace", "pod", "container"})),
    "DCGM_FI_DEV_GPU_UTIL": (
        "NVIDIA dcgm-exporter (pod labels renamed exported_* by the scrape)",
        frozenset({"exported_namespace", "exported_pod"}),
    ),
}


def external_label_ok(metric: str, label: str) -> bool:
    """Is `label` one we documented for the external `metric`?"""
    _, labels = EXTERNAL[metric]
    return label in labels or ("label_*" in labels and label.startswith("label_"))
