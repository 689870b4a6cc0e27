"""Checks of `components.*` against the release each one installs: a feature gate or integration the
controller does not know, or a locked gate set off its default, stops the controller at start-up (Kueue
refuses its configuration), which `pulumi up` only shows as a readiness gate that never passes."""

from __future__ import annotations

from collections import Counter

from trainer_infra.components.component import StackView
from trainer_infra.components.kueue import kueue_settings
from trainer_infra.components.plan import Releases
from trainer_infra.components.registry import COMPONENTS
from trainer_infra.components.trainer import trainer_settings
from trainer_infra.core.errors import ConfigIssue, did_you_mean
from trainer_infra.core.upstream.kueue import TRAINJOB_FRAMEWORK
from trainer_infra.core.upstream.trainer import STATUS_GATE
from trainer_infra.versions import MATRIX

TAS_GATE = "TopologyAwareScheduling"
#: settings that only reach the chart (its Helm values): without the chart they would be silently ignored
CHART_ONLY = {"replicas": "replicas", "resources": "resources", "feature_gates": "featureGates", "values": "values"}


def _gates(stack: StackView, releases: Releases) -> list[ConfigIssue]:
    issues = []
    for component in COMPONENTS:
        settings, release = component.settings(stack), releases.by_name.get(component.name)
        if settings is None or release is None or release.feature_gates is None:
            continue
        known = release.feature_gates
        for gate, on in getattr(settings, "feature_gates", {}).items():
            at = f"components.{component.name}.featureGates.{gate}"
            what = f"{component.name} {release.app_version}"
            if gate in release.locked_feature_gates:
                default = release.locked_feature_gates[gate]
                if on != default:
                    hint = "remove it: the gate is GA or deprecated and cannot be changed"
                    issues.append(ConfigIssue(at, f"locked to {str(default).lower()} in {what}", str(on).lower(), hint))
            elif gate not in known:
                listed = ", ".join(sorted(known)) if len(known) <= 10 else "versions/matrix.yaml"
                hint = did_you_mean(gate, known) or f"the gates of {what}: {listed}"
                issues.append(ConfigIssue(at, f"not a feature gate of {what}", gate, hint))
    return issues


def _kueue(stack: StackView, releases: Releases) -> list[ConfigIssue]:
    release = releases.by_name.get("kueue")
    if release is None:
        return []
    cfg = kueue_settings(stack)
    issues = []
    if TAS_GATE in cfg.feature_gates:
        hint = "set components.kueue.tas.enabled instead"
        issues.append(ConfigIssue(f"components.kueue.featureGates.{TAS_GATE}", "set by tas.enabled", None, hint))
    counts = Counter(cfg.frameworks)
    for i, name in enumerate(cfg.frameworks):
        at = f"components.kueue.frameworks[{i}]"
        if name == TRAINJOB_FRAMEWORK:
            hint = "TrainJobs are queued with components.kueue.trainJobIntegration"
            if not cfg.train_job_integration:
                issues.append(ConfigIssue(at, "contradicts trainJobIntegration: false", name, hint))
        elif release.integrations is not None and name not in release.integrations:
            hint = did_you_mean(name, release.integrations) or "Kueue knows: " + ", ".join(release.integrations)
            issues.append(ConfigIssue(at, f"not an integration of Kueue {release.app_version}", name, hint))
        if counts[name] > 1 and cfg.frameworks.index(name) != i:
            issues.append(ConfigIssue(at, "listed twice", name))
    return issues


def _trainer_progress(stack: StackView, releases: Releases) -> list[ConfigIssue]:
    """`progress: true` needs a Trainer release with the status server; its gate has one setting, `progress`."""
    release = releases.by_name.get("trainer")
    cfg = trainer_settings(stack)
    if release is None:
        return []
    issues = []
    if STATUS_GATE in cfg.feature_gates:
        hint = f"set components.trainer.progress: {str(cfg.feature_gates[STATUS_GATE]).lower()} instead"
        at = f"components.trainer.featureGates.{STATUS_GATE}"
        issues.append(ConfigIssue(at, "set by components.trainer.progress", None, hint))
    if cfg.progress and release.feature_gates is not None and STATUS_GATE not in release.feature_gates:
        having = [r.version for r in MATRIX.components["trainer"].releases if STATUS_GATE in (r.feature_gates or ())]
        hint = (
            f"set components.trainer.version to a release with the {STATUS_GATE} gate ({', '.join(having)}), "
            "or components.trainer.progress: false"
        )
        at = "components.trainer.progress"
        what = f"a Trainer release with the {STATUS_GATE} feature gate (the status server)"
        issues.append(ConfigIssue(at, f"needs {what}", f"Trainer {release.app_version}", hint))
    return issues


def _not_installed(stack: StackView) -> list[ConfigIssue]:
    """With `install: false` the chart is someone else's: a setting that only reaches it is refused, not dropped."""
    issues = []
    for component in COMPONENTS:
        settings = component.settings(stack)
        if settings is None or settings.install:
            continue
        for field, key in CHART_ONLY.items():
            if field in getattr(settings, "model_fields_set", ()):
                hint = f"set it where the component is installed, or set components.{component.name}.install: true"
                issues.append(
                    ConfigIssue(
                        f"components.{component.name}.{key}",
                        "a chart setting, and this stack does not install the chart (install: false)",
                        None,
                        hint,
                    )
                )
    return issues


def check_components(stack: StackView, releases: Releases) -> list[ConfigIssue]:
    return (
        _gates(stack, releases) + _kueue(stack, releases) + _trainer_progress(stack, releases) + _not_installed(stack)
    )
