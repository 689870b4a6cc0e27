"""The contract of a chart-installed component, and the release facts resolved for it from its matrix row.

A component is one module exporting `COMPONENT` (this Protocol), one row in versions/matrix.yaml (chart,
namespace, releases with their CRDs, API versions and images) and one line in components/registry.py.
The planner (components/plan.py) turns each installed component into a Helm release, a readiness gate
when it serves an API (CRDs or a webhook probe), and its namespace.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from trainer_infra.core.images import ChartsConfig, ImagesConfig, mirror_image
from trainer_infra.core.model import StrictModel
from trainer_infra.datacache.config import DataCacheConfig
from trainer_infra.nodepools.model import NodePool
from trainer_infra.observability.facts import MetricsEndpoint
from trainer_infra.observability.settings import ObservabilitySettings
from trainer_infra.storage.config import StorageConfig
from trainer_infra.teams.model import TeamConfig


class StackView(Protocol):
    """What a component may read of the stack config (StackConfig satisfies it)."""

    @property
    def components(self) -> Any: ...

    @property
    def images(self) -> ImagesConfig: ...

    @property
    def charts(self) -> ChartsConfig: ...

    @property
    def data_cache(self) -> DataCacheConfig: ...

    @property
    def storage(self) -> StorageConfig | None: ...

    @property
    def teams(self) -> Sequence[TeamConfig]: ...

    @property
    def observability(self) -> ObservabilitySettings: ...

    @property
    def node_pools(self) -> Sequence[NodePool]: ...


class ComponentSettings(Protocol):
    @property
    def install(self) -> bool: ...

    @property
    def version(self) -> str | None: ...

    @property
    def namespace(self) -> str | None: ...


@dataclass(frozen=True)
class ResolvedRelease:
    """One installed component at one version: its matrix row, with the stack's overrides applied."""

    component: str
    app_version: str  # the component's own version (matrix `version`), which its images and CRDs follow
    chart_version: str
    chart: str  # OCI reference or chart name (through the chart mirror when one is set)
    repository: str | None  # classic chart repository, when the chart is not on OCI
    namespace: str
    crds: tuple[str, ...] = ()
    api_versions: dict[str, str] = field(default_factory=dict)  # group → `group/version`
    images: dict[str, str] = field(default_factory=dict)  # role → image, through the image mirror
    train_job_api: str | None = None
    train_job_full_update: bool = False  # Kueue: see the matrix's trainJobFullUpdate
    feature_gates: tuple[str, ...] | None = None  # what the controller accepts; None: not known, not checked
    locked_feature_gates: dict[str, bool] = field(default_factory=dict)
    integrations: tuple[str, ...] | None = None
    #: False: the cluster already runs it (`install: false`); no chart or namespace, only its readiness gate
    install: bool = True

    def image(self, role: str) -> str:
        return self.images[role]


class ChartComponent(Protocol):
    @property
    def name(self) -> str:
        """The matrix row, the Helm release name, and `components.<name>` when configurable."""

    @property
    def settings_model(self) -> type[StrictModel] | None:
        """The model of `components.<name>` (None: configured elsewhere, e.g. the NFS driver)."""

    @property
    def version_path(self) -> str:
        """The config path of the version setting (for compatibility errors)."""

    @property
    def after(self) -> tuple[str, ...]:
        """Components whose readiness gate must pass before this chart is installed."""

    @property
    def owns_namespace(self) -> bool:
        """Create (and delete) the release namespace ourselves."""

    def settings(self, stack: StackView) -> ComponentSettings | None:
        """The component's settings in this stack; None when it is not installed."""

    def values(self, stack: StackView, release: ResolvedRelease) -> dict[str, Any]:
        """Helm values for the release (the user's `values` escape hatch merged last)."""

    def metrics_endpoint(self, release: ResolvedRelease) -> MetricsEndpoint | None:
        """Where the installed chart serves the controller's /metrics (None: no metrics we scrape)."""

    def probes(self, release: ResolvedRelease, mirror: str | None) -> tuple[dict[str, Any], ...]:
        """Objects whose dry-run create passes only when the component's webhook answers."""


def mirrored(images: dict[str, str], mirror: str | None) -> dict[str, str]:
    return {role: mirror_image(image, mirror) for role, image in images.items()}


class Controller:
    """A controller configured under `components.<name>` (its settings model); installed in every stack."""

    name: str
    owns_namespace = True

    @property
    def version_path(self) -> str:
        return f"components.{self.name}.version"

    def settings(self, stack: StackView) -> ComponentSettings | None:
        settings: ComponentSettings = getattr(stack.components, self.name)
        return settings

    def metrics_endpoint(self, release: ResolvedRelease) -> MetricsEndpoint | None:
        return None
