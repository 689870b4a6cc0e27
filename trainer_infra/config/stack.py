"""The whole stack config (`trainer-platform:*` keys) as one strict model."""

from __future__ import annotations

from pydantic import Field, SecretStr

from trainer_infra.catalog.config import RuntimesConfig
from trainer_infra.config.base import StrictModel
from trainer_infra.config.images import ChartsConfig, ImagesConfig
from trainer_infra.config.types import KubeMinor
from trainer_infra.controllers.jobset import JobSetConfig
from trainer_infra.controllers.kueue import KueueConfig
from trainer_infra.controllers.trainer import TrainerConfig
from trainer_infra.nodepools.pool import NodePoolConfig
from trainer_infra.queues.config import QueuesConfig
from trainer_infra.storage.config import DataCacheConfig, StorageConfig
from trainer_infra.teams import TeamConfig
from trainer_infra.versions import MATRIX


class KubernetesConfig(StrictModel):
    """The target cluster. `version` selects the schemas render validates against and the matrix minimums."""

    version: KubeMinor = Field(description='Target Kubernetes minor version, e.g. "1.34".')
    context: str | None = Field(default=None, description="kubeconfig context to use.")
    kubeconfig: SecretStr | None = Field(
        default=None, description="kubeconfig contents; set it with `pulumi config set --secret`."
    )


class ComponentsConfig(StrictModel):
    jobset: JobSetConfig = Field(default_factory=JobSetConfig)
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    kueue: KueueConfig = Field(default_factory=KueueConfig)

    def resolved_versions(self) -> dict[str, str]:
        """Configured versions with the matrix defaults filled in."""
        return {
            "jobset": self.jobset.version or MATRIX.defaults["jobset"],
            "trainer": self.trainer.version or MATRIX.defaults["trainer"],
            "kueue": self.kueue.version or MATRIX.defaults["kueue"],
        }

    def resolved_namespaces(self) -> dict[str, str]:
        return {
            "jobset": self.jobset.namespace or MATRIX.components["jobset"].namespace,
            "trainer": self.trainer.namespace or MATRIX.components["trainer"].namespace,
            "kueue": self.kueue.namespace or MATRIX.components["kueue"].namespace,
        }


class StackConfig(StrictModel):
    """Everything under the `trainer-platform:` namespace of a stack file."""

    kubernetes: KubernetesConfig
    components: ComponentsConfig = Field(default_factory=ComponentsConfig)
    images: ImagesConfig = Field(default_factory=ImagesConfig)
    charts: ChartsConfig = Field(default_factory=ChartsConfig)
    teams: list[TeamConfig] = Field(default_factory=list, description="Tenants of the platform.")
    runtimes: RuntimesConfig = Field(default_factory=RuntimesConfig)
    storage: StorageConfig | None = Field(default=None, description="Shared ReadWriteMany storage for team data.")
    data_cache: DataCacheConfig = Field(default_factory=DataCacheConfig)
    node_pools: list[NodePoolConfig] = Field(default_factory=list, description="GPU (and CPU) node pools.")
    queues: QueuesConfig = Field(default_factory=QueuesConfig)
    allow_unsupported_versions: bool = Field(
        default=False,
        description="Install version combinations the matrix refuses (each one is printed as a warning).",
    )
    allow_data_loss: bool = Field(
        default=False,
        description=(
            "Drop the protection of CRDs and other objects holding user work so that a removal or "
            "replacement goes through. Leave false except to tear down on purpose."
        ),
    )
