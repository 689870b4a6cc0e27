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


def controller_username(release: ResolvedRelease, values: Mapping[str, Any]) -> str:
    """`system:serviceaccount:<namespace>:<name>` of the release's controller (`values`: the chart values)."""
    chart = release.chart.rstrip("/").rsplit("/", 1)[-1]
    name = str(values.get("nameOverride") or chart)
    fullname = values.get("fullnameOverride") or (
        release.component if name in release.component else f"{release.component}-{name}"
    )
    fullname = str(fullname)[:63].rstrip("-")
    return f"system:serviceaccount:{release.namespace}:{fullname}-{SERVICE_ACCOUNT_SUFFIX[release.component]}"
