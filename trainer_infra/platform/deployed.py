"""What is installed now, read from the cluster by `pulumi preview`/`up` before anything is registered, so an
upgrade upstream says is unsafe is refused before the engine touches the cluster (trainer_infra/versions/upgrade.py).

A component's deployed version is the chart version in the `helm.sh/chart` label of its Deployments (each chart
sets it on every object; Pulumi's helm.v4.Chart renders it like `helm template`). The lowest one counts, so a
half-finished upgrade is checked from where it started. Reading needs only get/list, as the PR preview has.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import pulumi
from packaging.version import InvalidVersion, Version

from trainer_infra.core.errors import ConfigError, ConfigIssue
from trainer_infra.core.objects import HelmRelease, Plan
from trainer_infra.platform.gate import kube_client
from trainer_infra.versions.upgrade import check_upgrade, component_version, release_versions, unmigrated

CHART_LABEL = "helm.sh/chart"


def chart_name(release: HelmRelease) -> str:
    return release.chart.rstrip("/").rsplit("/", 1)[-1]


def versions_from_labels(release: HelmRelease, labels: Iterable[Mapping[str, str]]) -> str | None:
    """The component version of the lowest chart version among the Deployments' labels (None: not installed)."""
    prefix = chart_name(release) + "-"
    found = []
    for label in labels:
        value = label.get(CHART_LABEL, "")
        if value.startswith(prefix):
            try:
                found.append(Version(value.removeprefix(prefix)))
            except InvalidVersion:
                continue
    if not found:
        return None
    return component_version(release.component, str(min(found)))


def check_deployed(plan: Plan, *, allow_unsupported: bool) -> None:
    """Refuse (ConfigError: exit 2, nothing registered) an unsafe upgrade of what the cluster runs now."""
    try:
        client, api = kube_client(plan.cluster.kubeconfig, plan.cluster.context)
        apps = client.AppsV1Api(api)
        deployed = {}
        for release in plan.releases:
            items = apps.list_namespaced_deployment(release.namespace).items
            version = versions_from_labels(release, [d.metadata.labels or {} for d in items])
            if version is not None:
                deployed[release.component] = version
    except Exception as exc:  # no cluster yet, no access: the engine reports that itself
        pulumi.log.warn(
            f"deployed versions not read ({type(exc).__name__}: {str(exc)[:200]}); upgrade path not checked"
        )
        return
    target = release_versions(plan.releases)
    check = check_upgrade(deployed, target, allow_unsupported=allow_unsupported)
    refused = list(check.refused)
    if check.migrations:
        try:
            listed = client.ApiextensionsV1Api(api).list_custom_resource_definition().items
        except Exception as exc:
            raise ConfigError(
                [
                    ConfigIssue(
                        f"components.{r.component}.version",
                        f"[{r.id}] cannot check the CRDs' storedVersions",
                        f"{type(exc).__name__}: {str(exc)[:200]}",
                        "grant get/list on customresourcedefinitions",
                    )
                    for r in check.migrations
                ],
                "the upgrade from what the cluster runs",
            ) from None
        refused += unmigrated(check.migrations, [api.sanitize_for_serialization(c) for c in listed])
    for warning in check.warnings:
        pulumi.log.warn(warning)
    if refused:
        where = ", ".join(f"{k} {v}" for k, v in sorted(deployed.items()))
        raise ConfigError(refused, f"the upgrade from what the cluster runs ({where})")
