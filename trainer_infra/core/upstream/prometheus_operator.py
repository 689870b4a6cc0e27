"""Names the Prometheus Operator defines (prometheus-operator `pkg/apis/monitoring/v1`).

The operator is not installed by the platform, so its API version is the one the objects are written in here.
"""

from __future__ import annotations

GROUP = "monitoring.coreos.com"
MONITORING_API = f"{GROUP}/v1"
