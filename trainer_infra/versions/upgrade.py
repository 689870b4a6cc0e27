"""Is the step from the deployed versions to the stack's ones an upgrade upstream supports?

`deployed` comes from `validate --base` (the render of the deployed commit) or `--previous`; the rules are data
(matrix.yaml, `upgradePaths`). Pure: no cluster here; `unmigrated` checks CRDs a caller read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from packaging.version import Version

from trainer_infra.core.errors import ConfigIssue
from trainer_infra.core.objects import HelmRelease
from trainer_infra.versions.matrix import MATRIX, UpgradePath

RUNBOOK = "docs/versions.md#upgrade-runbook"


@dataclass(frozen=True)
class UpgradeCheck:
    refused: list[ConfigIssue] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: rules whose stored-version migration the cluster's CRDs must show done (checked where a cluster is read)
    migrations: list[UpgradePath] = field(default_factory=list)


def _path(name: str) -> str:
    return f"components.{name}.version"


def check_upgrade(deployed: Mapping[str, str], target: Mapping[str, str], *, allow_unsupported: bool) -> UpgradeCheck:
    """Every reason not to go from `deployed` to `target` directly, each with the path to take instead.
    A component not deployed yet is a first install: nothing to check."""
    check = UpgradeCheck()
    for name in sorted(set(deployed) & set(target)):
        now, want = deployed[name], target[name]
        if now == want:
            continue
        comp = MATRIX.components.get(name)
        if comp is None:
            continue
        if Version(want) < Version(now):
            check.refused.append(
                ConfigIssue(
                    _path(name),
                    f"a downgrade of {name} from the deployed {now} is not supported (newer CRD schemas and "
                    "stored objects may not be readable by the older controller)",
                    want,
                    f"keep {_path(name)}: {now}; to leave a bad upgrade, fix forward and rerun `pulumi up` ({RUNBOOK})",
                )
            )
            continue
        if comp.release(now) is None:
            message = f"the matrix does not know an upgrade of {name} from the deployed {now}"
            hint = (
                f"the matrix upgrades {name} from {', '.join(comp.versions)}: upgrade to one of them first, outside "
                "this stack or with allowUnsupportedVersions: true, or add the release to versions/matrix.yaml"
            )
            if not allow_unsupported:
                check.refused.append(ConfigIssue(_path(name), message, f"{now} → {want}", hint))
                continue
            check.warnings.append(f"UNSUPPORTED (allowUnsupportedVersions): {_path(name)}: {message}")
        for rule in MATRIX.upgrade_paths:
            if rule.component != name or not rule.applies(now, want):
                continue
            why = f"[{rule.id}] {rule.reason} (sources: {'; '.join(rule.sources)})"
            if rule.through:
                check.refused.append(
                    ConfigIssue(
                        _path(name),
                        f"{name} {now} → {want} skips a required release: {why}",
                        want,
                        f"first `pulumi up` with {_path(name)}: {rule.through}, then {want} ({RUNBOOK})",
                    )
                )
            if rule.migrate_stored_versions:
                check.migrations.append(rule)
                stale = ", ".join(f"{g}/{v}" for g, v in rule.migrate_stored_versions.items())
                check.warnings.append(
                    f"{_path(name)}: {name} {now} → {want} needs the objects stored as {stale} migrated first "
                    f"and that version dropped from the CRDs' status.storedVersions ({RUNBOOK}); "
                    "check them on the cluster before `pulumi up`: `trainer-infra storage-versions [--migrate]`"
                )
    return check


def unmigrated(rules: Iterable[UpgradePath], crds: Iterable[Mapping[str, Any]]) -> list[ConfigIssue]:
    """The CRDs whose `status.storedVersions` still list a version a rule says to migrate away from."""
    issues = []
    crds = list(crds)
    for rule in rules:
        for group, version in rule.migrate_stored_versions.items():
            stale = sorted(
                c["metadata"]["name"]
                for c in crds
                if c.get("spec", {}).get("group") == group
                and version in (c.get("status") or {}).get("storedVersions", [])
            )
            if stale:
                issues.append(
                    ConfigIssue(
                        _path(rule.component),
                        f"[{rule.id}] objects stored as {group}/{version} are not migrated: {rule.reason}",
                        f"status.storedVersions of {', '.join(stale)} list {version}",
                        f"`trainer-infra storage-versions --migrate` first ({RUNBOOK})",
                    )
                )
    return issues


def versions_of_render(out: Path) -> dict[str, str]:
    """Component → version of the releases a `trainer-infra render` directory lists (helm-releases.yaml)."""
    releases = (yaml.safe_load((out / "helm-releases.yaml").read_text()) or {}).get("releases") or []
    by_chart = {row.chart.rsplit("/", 1)[-1]: name for name, row in MATRIX.components.items()}
    found = {}
    for rel in releases:
        name = by_chart.get(str(rel["chart"]).rsplit("/", 1)[-1])
        if name:
            found[name] = component_version(name, str(rel["version"]))
    return found


def release_versions(releases: Iterable[HelmRelease]) -> dict[str, str]:
    """Component → version of a plan's Helm releases."""
    return {r.component: component_version(r.component, r.chart_version) for r in releases}


def component_version(name: str, chart_version: str) -> str:
    """The matrix release a chart version installs (the chart version itself when the matrix has none)."""
    comp = MATRIX.components.get(name)
    matching = [r.version for r in comp.releases if r.chart_version == chart_version] if comp else []
    return matching[0] if matching else chart_version
