"""The chart-installed components, in install order. A new component is one module exporting `COMPONENT`,
one row in versions/matrix.yaml and one line here."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from trainer_infra.components import csi_driver_nfs, device_plugins, jobset, kueue, trainer
from trainer_infra.components.component import ChartComponent
from trainer_infra.core.model import StrictModel
from trainer_infra.core.registry import Registry, model_with_settings

COMPONENTS: Registry[ChartComponent] = Registry(
    jobset.COMPONENT,
    trainer.COMPONENT,
    kueue.COMPONENT,
    csi_driver_nfs.COMPONENT,
    device_plugins.NVIDIA,
    device_plugins.EFA,
)


class Components(StrictModel):
    """Settings of the controllers (`components.<name>`); versions and namespaces default from the matrix."""


if TYPE_CHECKING:
    ComponentsConfig = Components
else:
    ComponentsConfig = model_with_settings(
        "ComponentsConfig",
        Components,
        {
            c.name: (c.settings_model, Field(default_factory=c.settings_model))
            for c in COMPONENTS
            if c.settings_model is not None
        },
    )
