"""The whole stack config (`trainer-platform:*` keys) as one strict model, composed from every area's own
config models (each lives beside the code it configures)."""

from __future__ import annotations

from pydantic import Field, SecretStr

from trainer_infra.catalog.config import RuntimesConfig
from trainer_infra.components.registry import ComponentsConfig
from trainer_infra.core.images import ChartsConfig, ImagesConfig
from trainer_infra.core.model import StrictModel
from trainer_infra.core.types import KubeMinor
from trainer_infra.datacache.config import DataCacheConfig
from trainer_infra.fleet.config import FleetConfig
from trainer_infra.nodepools.checks import MAX_FLAVORS
from trainer_infra.nodepools.registry import CloudConfig, NodePoolConfig
from trainer_infra.observability.settings import ObservabilitySettings
from trainer_infra.queues.config import QueuesConfig
from trainer_infra.storage.config import StorageConfig
from trainer_infra.teams.model import TeamConfig
from trainer_infra.tenancy.config import TenancyConfig


class KubernetesConfig(StrictModel):
    """The target cluster. `version` selects the schemas render validates against and the matrix minimums."""

    version: KubeMinor = Field(description='Target Kubernetes minor version, e.g. "1.34".')
    context: str | None = Field(default=None, description="kubeconfig context to use.")
    kubeconfig: SecretStr | None = Field(
        default=None, description="kubeconfig contents; set it with `pulumi config set --secret`."
    )


# Teams per stack: each is ~10 objects and a ClusterQueue in one cohort (bench: 1000 teams render in minutes).
MAX_TEAMS = 2000


class StackConfig(StrictModel):
    """Everything under the `trainer-platform:` namespace of a stack file."""

    kubernetes: KubernetesConfig
    components: ComponentsConfig = Field(default_factory=ComponentsConfig)
    images: ImagesConfig = Field(default_factory=ImagesConfig)
    charts: ChartsConfig = Field(default_factory=ChartsConfig)
    teams: list[TeamConfig] = Field(
        default_factory=list, max_length=MAX_TEAMS, description=f"Tenants of the platform (at most {MAX_TEAMS})."
    )
    tenancy: TenancyConfig = Field(default_factory=TenancyConfig)
    runtimes: RuntimesConfig = Field(default_factory=RuntimesConfig)
    storage: StorageConfig | None = Field(default=None, description="Shared ReadWriteMany storage for team data.")
    data_cache: DataCacheConfig = Field(default_factory=DataCacheConfig)
    node_pools: list[NodePoolConfig] = Field(
        default_factory=list,
        max_length=MAX_FLAVORS,  # refused before the pairwise checks, which grow with the square of the count
        description=f"GPU (and CPU) node pools (at most {MAX_FLAVORS}, Kueue's flavors per resource group).",
    )
    cloud: CloudConfig = Field(
        default_factory=CloudConfig,
        description="The cluster the cloud node pools (gke, eks, aks) join: provider settings, cluster stack outputs.",
    )
    queues: QueuesConfig = Field(default_factory=QueuesConfig)
    observability: ObservabilitySettings = Field(
        default_factory=ObservabilitySettings,
        description="Metrics, alerts and dashboards for the controllers and team queues (docs/observability.md).",
    )
    team_shards: int = Field(
        default=0,
        ge=0,
        le=100,
        description=(
            "Deploy the teams in this many stacks of their own, `<stack>.teams-NN`, run after this stack with "
            "`--config-file` of this stack's file (0: every team in this stack). For hundreds of teams on a DIY "
            "backend (docs/large-organisations.md); a team's stack is a hash of its name. Changing the count moves "
            "teams between stacks: plan it with `trainer-infra shards --moves-from`."
        ),
    )
    fleet: FleetConfig | None = Field(
        default=None, description="Several clusters as one platform (MultiKueue manager + workers, docs/fleet.md)."
    )
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
