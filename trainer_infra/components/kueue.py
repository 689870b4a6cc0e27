"""Kueue: quota, queueing and topology-aware placement for TrainJobs."""

from __future__ import annotations

from typing import Any, Literal

import yaml
from pydantic import Field

from trainer_infra.components.component import Controller, ResolvedRelease, StackView
from trainer_infra.components.settings import PROBE_NAME, ControllerConfig, deep_merge
from trainer_infra.core.images import split_image
from trainer_infra.core.model import StrictModel
from trainer_infra.core.types import Duration
from trainer_infra.core.upstream import kubernetes, kueue
from trainer_infra.manifests import meta
from trainer_infra.observability.facts import MetricsEndpoint

DEFAULT_FRAMEWORKS = (kueue.BATCH_JOB_FRAMEWORK, kueue.JOBSET_FRAMEWORK)


class TasConfig(StrictModel):
    """Topology-Aware Scheduling (beta, on by default since Kueue 0.14)."""

    enabled: bool = True


class RequeuingConfig(StrictModel):
    """What Kueue does with a Workload evicted because its pods did not get ready in time."""

    backoff_limit_count: int | None = Field(
        default=3,
        ge=0,
        description="Requeues before the Workload is deactivated for good (its quota freed); null: forever.",
    )
    backoff_base_seconds: int = Field(default=60, ge=1, description="First requeue delay; it doubles each time.")
    backoff_max_seconds: int = Field(default=3600, ge=1, description="Longest requeue delay.")
    timestamp: Literal["Eviction", "Creation"] = Field(
        default="Eviction", description="Requeue order: by the eviction time or the Workload's creation."
    )


class WaitForPodsReadyConfig(StrictModel):
    """An admitted job holds its quota only while its pods get ready: a job whose pods are refused or never
    scheduled is evicted after `timeout` and requeued (Kueue 0.19 turns this on with 30m and endless requeues;
    we set it explicitly so a stuck job cannot hold a team's GPUs forever)."""

    timeout: Duration = Field(default="10m", description="Time for all pods of an admitted job to become ready.")
    recovery_timeout: Duration | None = Field(
        default=None, description="Time to get ready again after a pod failed while running (default: timeout)."
    )
    block_admission: bool = Field(
        default=False, description="Admit nothing else until the admitted job is ready (serializes admissions)."
    )
    requeuing: RequeuingConfig = Field(default_factory=RequeuingConfig)

    def as_kueue(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "timeout": self.timeout,
            "blockAdmission": self.block_admission,
            "requeuingStrategy": {
                "timestamp": self.requeuing.timestamp,
                "backoffBaseSeconds": self.requeuing.backoff_base_seconds,
                "backoffMaxSeconds": self.requeuing.backoff_max_seconds,
            },
        }
        if self.requeuing.backoff_limit_count is not None:
            out["requeuingStrategy"]["backoffLimitCount"] = self.requeuing.backoff_limit_count
        if self.recovery_timeout is not None:
            out["recoveryTimeout"] = self.recovery_timeout
        return out


class KueueConfig(ControllerConfig):
    """Kueue controller (chart `kueue`)."""

    train_job_integration: bool = Field(
        default=True, description=f"Let Kueue queue TrainJobs (framework {kueue.TRAINJOB_FRAMEWORK})."
    )
    frameworks: list[str] = Field(
        default_factory=lambda: list(DEFAULT_FRAMEWORKS),
        description="Other Kueue integrations to enable (the TrainJob one is governed by trainJobIntegration).",
    )
    tas: TasConfig = Field(default_factory=TasConfig)
    wait_for_pods_ready: WaitForPodsReadyConfig = Field(default_factory=WaitForPodsReadyConfig)
    fair_sharing: bool = Field(
        default=False,
        description="Fair sharing among the ClusterQueues of a cohort (on automatically when a team sets "
        "fairSharingWeight).",
    )


def kueue_frameworks(cfg: KueueConfig, lws: bool = False) -> list[str]:
    """The integrations Kueue runs. With `lws` (the data cache is on) Kueue's real LeaderWorkerSet webhook
    handles LWSs instead of a no-op: a cache cluster owned by its (Kueue-managed) TrainJob is neither queued
    nor suspended, and an LWS a team labels with a queue is admitted like any job."""
    frameworks = [f for f in cfg.frameworks if f != kueue.TRAINJOB_FRAMEWORK]
    if cfg.train_job_integration:
        frameworks.append(kueue.TRAINJOB_FRAMEWORK)
    if lws:
        frameworks.append(kueue.LEADERWORKERSET_FRAMEWORK)  # the data cache's cache clusters are LWSs
    return sorted(set(frameworks))


def kueue_feature_gates(cfg: KueueConfig) -> dict[str, bool]:
    """TAS off takes its default-on sub-gates with it (Kueue refuses to start otherwise); the stack's own win."""
    tas_off = {} if cfg.tas.enabled else dict.fromkeys(kueue.TAS_DEPENDENT_GATES, False)
    return {"TopologyAwareScheduling": cfg.tas.enabled, **tas_off, **cfg.feature_gates}


def with_multikueue(values: dict[str, Any], multi_kueue: dict[str, str]) -> dict[str, Any]:
    """The chart values with the Configuration's `multiKueue` block (a MultiKueue manager's settings)."""
    manager = values["managerConfig"]
    config = {**yaml.safe_load(manager["controllerManagerConfigYaml"]), "multiKueue": dict(sorted(multi_kueue.items()))}
    return {
        **values,
        "managerConfig": {**manager, "controllerManagerConfigYaml": yaml.safe_dump(config, sort_keys=True)},
    }


class Kueue(Controller):
    """Installed once Trainer is ready, which waits for JobSet (`after`): it only enables integrations whose
    CRDs (TrainJob, JobSet) already exist."""

    name = "kueue"
    settings_model = KueueConfig
    after = ("trainer",)

    def values(self, stack: StackView, release: ResolvedRelease) -> dict[str, Any]:
        cfg = kueue_settings(stack)
        repo, tag = split_image(release.image("manager"))
        manager_config = {
            "apiVersion": release.api_versions[kueue.CONFIG_GROUP],
            "kind": "Configuration",
            "health": {"healthProbeBindAddress": ":8081"},
            "metrics": {"bindAddress": ":8443"},
            "webhook": {"port": 9443},
            "leaderElection": {"leaderElect": True, "resourceName": kueue.LEADER_ELECTION_ID},
            "controller": {"groupKindConcurrency": {kueue.WORKLOAD_GROUP_KIND: 10}},
            "integrations": {"frameworks": kueue_frameworks(cfg, stack.data_cache.enabled)},
            "waitForPodsReady": cfg.wait_for_pods_ready.as_kueue(),
            # node disk is bounded per pod (tenancy/ephemeral_storage.py), not a team quota: a workload requesting
            # it would otherwise be inadmissible ("resource ephemeral-storage unavailable in ClusterQueue",
            # kueue v0.19.2 pkg/scheduler/flavorassigner/flavorassigner.go findFlavorForPodSets)
            "resources": {"excludeResourcePrefixes": [kubernetes.EPHEMERAL_STORAGE]},
        }
        if stack.observability.enabled:
            # Per-ClusterQueue quota, reservation and usage gauges (off by default): what the alerts and the
            # team dashboard read. Reporting only: scheduling is unchanged.
            manager_config["metrics"] = {"bindAddress": ":8443", "enableClusterQueueResources": True}
        # Fair sharing weights on teams only work with fair sharing on in Kueue's configuration.
        if cfg.fair_sharing or any(t.fair_sharing_weight is not None for t in stack.teams):
            # v1beta2: the block's presence turns fair sharing on (there is no `enable` field any more).
            manager_config["fairSharing"] = {
                "preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]
            }
        values: dict[str, Any] = {
            "controllerManager": {
                "replicas": cfg.replicas,
                "manager": {
                    "image": {"repository": repo, "tag": tag, "pullPolicy": "IfNotPresent"},
                    "resources": cfg.resources.as_chart_values(),
                },
                "featureGates": [
                    {"name": name, "enabled": on} for name, on in sorted(kueue_feature_gates(cfg).items())
                ],
            },
            "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(manager_config, sort_keys=True)},
        }
        return deep_merge(values, cfg.values)

    def metrics_endpoint(self, release: ResolvedRelease) -> MetricsEndpoint:
        """Chart templates/manager/auth_proxy_service.yaml: `<fullname>-controller-manager-metrics-service`,
        port `https` (8443), behind controller-runtime's authn/authz filter (cmd/kueue/main.go)."""
        selector = {kubernetes.APP_NAME: "kueue", kubernetes.APP_INSTANCE: self.name}
        selector[kubernetes.APP_COMPONENT] = "metrics-service"
        service = f"{self.name}-controller-manager-metrics-service"
        return MetricsEndpoint(self.name, release.namespace, service, "https", tuple(selector.items()), True)

    def probes(self, release: ResolvedRelease, mirror: str | None) -> tuple[dict[str, Any], ...]:
        return (
            {
                "apiVersion": release.api_versions[kueue.GROUP],
                "kind": "ResourceFlavor",
                "metadata": meta.metadata(PROBE_NAME),
                "spec": {},
            },
        )


COMPONENT = Kueue()


def kueue_settings(stack: StackView) -> KueueConfig:
    """`components.kueue`, typed (the components model is built from the registry)."""
    settings: KueueConfig = stack.components.kueue
    return settings
