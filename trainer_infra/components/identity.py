"""The username each controller has in the cluster: the ServiceAccount its chart creates. Admission rules that
trust a controller (only Kueue resumes a suspended TrainJob) name it, so it must match the chart exactly.

All three charts name it `<fullname>-<suffix>` (`_helpers.tpl`): `fullname` is `fullnameOverride`, else the
release name when it contains the chart name (or `nameOverride`), else `<release>-<chart name>`; truncated
to 63 characters. Release `trainer` of chart `kubeflow-trainer` → `trainer-kubeflow-trainer-controller-manager`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainer_infra.components.component import ResolvedRelease

SERVICE_ACCOUNT_SUFFIX = {"jobset": "controller", "kueue": "controller-manager", "trainer": "controller-manager"}


def chart_name(chart: str) -> str:
    """The chart's own name: the last segment of an OCI reference or repository path."""
    return chart.rstrip("/").rsplit("/", 1)[-1]


def service_account_username(
    component: str, release: str, chart: str, namespace: str, values: Mapping[str, Any]
) -> str:
    """`system:serviceaccount:<namespace>:<name>` of `component`'s controller, installed as Helm release
    `release` of `chart` with chart values `values`."""
    name = str(values.get("nameOverride") or chart_name(chart))
    fullname = str(values.get("fullnameOverride") or (release if name in release else f"{release}-{name}"))
    return f"system:serviceaccount:{namespace}:{fullname[:63].rstrip('-')}-{SERVICE_ACCOUNT_SUFFIX[component]}"


def controller_username(release: ResolvedRelease, values: Mapping[str, Any]) -> str:
    """The username of the release's controller (`values`: the chart values); the release is named after its
    component."""
    return service_account_username(release.component, release.component, release.chart, release.namespace, values)
