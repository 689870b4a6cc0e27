"""The alerts, in rule order. A new alert is one `Alert` in a module of this package plus one line here: its
settings block `observability.alerts.<name>` and its rules follow from the entry."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from trainer_infra.core.model import StrictModel
from trainer_infra.core.registry import Registry, model_with_settings
from trainer_infra.observability.alerts import controllers, jobs, nodes, queues
from trainer_infra.observability.alerts.model import Alert

ALERTS: Registry[Alert[Any]] = Registry(
    controllers.CONTROLLER_DOWN,
    controllers.RECONCILE_ERRORS,
    controllers.WEBHOOK_ERRORS,
    controllers.WEBHOOK_LATENCY,
    queues.WORKLOADS_PENDING,
    queues.QUOTA_SATURATED,
    queues.BORROWING,
    jobs.TRAIN_JOB_FAILURES,
    queues.CLUSTER_QUEUE_INACTIVE,
    queues.WORKLOADS_STRANDED,
    nodes.POOL_NODES_NOT_READY,
)


def _alerts_model() -> type[StrictModel]:
    """One settings block per registered alert, its defaults those of its model."""
    fields = {a.name: (a.settings_model, Field(default_factory=a.settings_model)) for a in ALERTS}
    return model_with_settings("Alerts", StrictModel, fields, doc="One block per alert (docs/observability.md).")


if TYPE_CHECKING:
    Alerts = StrictModel
else:
    Alerts = _alerts_model()
