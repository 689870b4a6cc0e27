"""Checks of `dataCache`, alone and against `teams[]` and `tenancy`: what would widen the cache deputy's reach."""

from __future__ import annotations

from collections.abc import Sequence

from trainer_infra.core import kube
from trainer_infra.core.errors import ConfigIssue
from trainer_infra.datacache.config import DataCacheConfig
from trainer_infra.datacache.pinned import CACHE_INITIALIZER
from trainer_infra.teams.model import TeamConfig


def check_data_cache(data_cache: DataCacheConfig) -> list[ConfigIssue]:
    """The cache image must be a valid reference. (`installLws: false` works: `chart.py` turns the chart's
    `dataCache.enabled` off with it, the only switch of the LWS subchart that Helm reads.)"""
    issues = []
    image = data_cache.cache_image
    ref = f"{image.registry}/{image.repository}:{image.tag or 'v0.0.0'}"
    if (problem := kube.image_reference_problem(ref)) is not None:
        issues.append(ConfigIssue("dataCache.cacheImage", problem, ref))
    return issues


def check_data_cache_protections(
    data_cache: DataCacheConfig,
    teams: Sequence[TeamConfig],
    priority_classes: Sequence[str],
) -> list[ConfigIssue]:
    """The data cache's initializer runs with more rights than a member (it creates LeaderWorkerSets, Services
    and ServiceAccounts): a stack that switches off what bounds it is refused. (Its cache clusters
    are charged through Kueue's LeaderWorkerSet integration, on whenever the data cache is, with or without
    `trainJobIntegration`.)"""
    if not data_cache.enabled:
        return []
    issues = []
    for i, name in enumerate(priority_classes):
        if name.startswith("system-"):
            issues.append(
                ConfigIssue(
                    f"tenancy.priorityClasses[{i}]",
                    "a system priority class lets team pods (the data cache's included) preempt the platform's "
                    "controllers and other teams' admitted jobs",
                    name,
                    "list your own PriorityClasses only",
                )
            )
    for i, team in enumerate(teams):
        for j, ref in enumerate(team.members.service_accounts):
            if ref.rpartition("/")[2] == CACHE_INITIALIZER:
                issues.append(
                    ConfigIssue(
                        f"teams[{i}].members.serviceAccounts[{j}]",
                        "the data cache initializer's account may not be a member: code running as it would "
                        "submit jobs with a member's rights on top of its own",
                        ref,
                        "give members their own ServiceAccount",
                    )
                )
    return issues


def check_job_service_accounts(teams: Sequence[TeamConfig]) -> list[ConfigIssue]:
    """The data cache's initializer ServiceAccount may create ServiceAccounts and LeaderWorkerSets: a job that
    runs as it gets those rights (a privilege hop), so it cannot be on a team's job allow-list."""
    issues = []
    for i, team in enumerate(teams):
        for j, name in enumerate(team.job_service_accounts):
            if name == CACHE_INITIALIZER:
                hint = "jobs get this account only through the torch-distributed-with-cache runtime"
                message = "the data cache initializer's account creates ServiceAccounts and LeaderWorkerSets"
                issues.append(ConfigIssue(f"teams[{i}].jobServiceAccounts[{j}]", message, name, hint))
    return issues
