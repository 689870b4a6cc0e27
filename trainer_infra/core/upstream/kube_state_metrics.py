"""Names kube-state-metrics defines."""

from __future__ import annotations

#: Its Go module, whose source defines the metric names.
MODULE = "k8s.io/kube-state-metrics/v2"
