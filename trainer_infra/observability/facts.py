"""What observability needs to know about the platform: plain facts, resolved once by the planner.

Rules, monitors and dashboards read only these, never the stack config, so they are pure
functions of (settings, facts) and can be unit-tested with hand-made facts.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class MetricsEndpoint:
    """How one controller serves /metrics (read from its pinned chart and source, see README).

    ``authenticated``: the endpoint sits behind controller-runtime's authn/authz filter, so the
    scraper must send a ServiceAccount token allowed to ``get`` the non-resource URL ``/metrics``.
    """

    component: str
    namespace: str
    service: str
    port: str
    selector: tuple[tuple[str, str], ...]
    authenticated: bool
    #: The controller's own metrics carry a `namespace` label meaning the object's namespace (JobSet's
    #: `jobset_failed_total{namespace}`): keep it instead of renaming it `exported_namespace`.
    honor_labels: bool = False


@dataclass(frozen=True)
class ObservedTeam:
    """A team as the metrics see it: its ClusterQueue (Kueue labels) and namespace (JobSet labels)."""

    name: str
    namespace: str
    cluster_queue: str


@dataclass(frozen=True)
class PlatformFacts:
    """Everything the observability objects are derived from."""

    endpoints: tuple[MetricsEndpoint, ...]
    teams: tuple[ObservedTeam, ...]
    pools: tuple[str, ...]
    pool_label: str
    extra: dict[str, str] = field(default_factory=dict)

    def endpoint(self, component: str) -> MetricsEndpoint:
        return next(e for e in self.endpoints if e.component == component)
