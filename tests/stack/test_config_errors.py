"""A platform engineer's mistakes come back all at once, each with its path, what was expected, what was
found and a hint; exit code 2 and no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import ROOT
from trainer_infra.core.errors import ConfigError
from trainer_infra.stack.validate import validate

K8S = {"version": "1.34"}

# (config, path, message, found, hint); hint None means "no hint expected".
CASES: list[tuple[dict[str, Any], str, str, str | None, str | None]] = [
    ({"kubernetes": K8S, "componets": {}}, "componets", "unknown key 'componets'", None, "did you mean 'components'?"),
    (
        {"kubernetes": K8S, "components": {"kueue": {"replcias": 2}}},
        "components.kueue.replcias",
        "unknown key 'replcias'",
        None,
        "did you mean 'replicas'?",
    ),
    ({}, "kubernetes", "required key is missing", None, None),
    (
        {"kubernetes": {"version": "1.3"}},
        "kubernetes.version",
        'expected a Kubernetes minor version "1.NN"',
        '"1.3"',
        'quote it so YAML keeps it a string, e.g. "1.34"',
    ),
    (
        {"kubernetes": K8S, "components": {"kueue": {"version": "v0.19.2"}}},
        "components.kueue.version",
        'expected a version "MAJOR.MINOR.PATCH"',
        '"v0.19.2"',
        'write it without a leading "v", e.g. "0.19.2"',
    ),
    (
        {"kubernetes": K8S, "components": {"kueue": {"version": "0.18.0"}}},
        "components.kueue.version",
        "kueue 0.18.0 is not in the compatibility matrix",
        None,
        "supported: 0.19.2, 0.18.3; or set allowUnsupportedVersions: true to install anyway",
    ),
    (
        {"kubernetes": {"version": "1.30"}},
        "kubernetes.version",
        "Kubernetes 1.30 is below the minimum 1.31 of trainer 2.2.1",
        None,
        "upgrade the cluster to >= 1.31 or pick an older trainer; "
        "or set allowUnsupportedVersions: true to install anyway",
    ),
    (
        {"kubernetes": K8S, "components": {"jobset": {"replicas": 0}}},
        "components.jobset.replicas",
        "expected greater than or equal to 1",
        "0",
        None,
    ),
    (
        {"kubernetes": K8S, "components": {"trainer": {"resources": {"requests": {"cpu": "lots"}}}}},
        "components.trainer.resources.requests.cpu",
        "expected a Kubernetes quantity",
        '"lots"',
        "e.g. 500m, 2, 1.5, 512Mi, 4Gi",
    ),
    (
        {"kubernetes": K8S, "components": {"trainer": {"namespace": "Kubeflow_System"}}},
        "components.trainer.namespace",
        "expected a DNS label",
        '"Kubeflow_System"',
        "use lowercase a-z, 0-9 and '-', starting and ending with a letter or digit",
    ),
    (
        {"kubernetes": K8S, "images": {"registryMirror": "https://mirror.corp"}},
        "images.registryMirror",
        "expected a registry host[:port][/path]",
        '"https://mirror.corp"',
        "no scheme, e.g. mirror.corp:5000/k8s",
    ),
    (
        {"kubernetes": K8S, "charts": {"repositoryMirror": "mirror.corp/charts"}},
        "charts.repositoryMirror",
        "expected an OCI repository",
        '"mirror.corp/charts"',
        "e.g. oci://mirror.corp/charts",
    ),
    (
        {"kubernetes": K8S, "components": {"jobset": {"featureGates": {"X": True}}}},
        "components.jobset.featureGates",
        "the JobSet chart has no featureGates value (pass controller flags through `values` if you really need one)",
        '{"X": true}',
        None,
    ),
    (
        {"kubernetes": K8S, "allowDataLoss": "maybe"},
        "allowDataLoss",
        "expected a valid boolean, unable to interpret input",
        '"maybe"',
        None,
    ),
    (
        {"kubernetes": K8S, "teams": [{"name": "ml"}, {"name": "Vision"}]},
        "teams[1].name",
        "expected a DNS label",
        '"Vision"',
        "use lowercase a-z, 0-9 and '-', starting and ending with a letter or digit",
    ),
    (
        {"kubernetes": K8S, "queues": {"priorityClasses": [{"name": "normal", "value": 1000}]}},
        "queues.defaultPriorityClass",
        "the default class must have value 0: Kueue gives a job without the kueue.x-k8s.io/priority-class label "
        "priority 0, whatever class is called the default",
        "normal: 1000",
        "give normal value 0 and order the other classes around it (negative values are allowed), "
        "or set defaultPriorityClass: null",
    ),
    (
        {"kubernetes": K8S, "queues": {"defaultPriorityClass": "norml"}},
        "queues.defaultPriorityClass",
        "names no class of queues.priorityClasses",
        "norml",
        "did you mean 'normal'?",
    ),
    (
        {"kubernetes": K8S, "runtimes": {"faultTolerance": {"maxRestarts": -1}}},
        "runtimes.faultTolerance.maxRestarts",
        "maxRestarts must be 0 or more",
        "-1",
        "0 fails the TrainJob on the first failure, N restarts the whole JobSet up to N times",
    ),
]


@pytest.mark.parametrize(("raw", "path", "message", "found", "hint"), CASES, ids=[c[1] for c in CASES])
def test_bad_config_names_path_expectation_and_hint(
    raw: dict[str, Any], path: str, message: str, found: str | None, hint: str | None
) -> None:
    with pytest.raises(ConfigError) as info:
        validate(raw)
    issues = [(i.path, i.message, i.found, i.hint) for i in info.value.issues]
    assert issues == [(path, message, found, hint)]


def test_known_bad_combination_says_why_and_what_instead() -> None:
    raw = {"kubernetes": K8S, "components": {"trainer": {"version": "2.3.0"}}}
    with pytest.raises(ConfigError) as info:
        validate(raw)
    (issue,) = info.value.issues
    assert issue.path == "components.trainer.version"
    assert "[trainjob-api]" in issue.message and "Kueue 0.19.2 is built against the Trainer v2.2" in issue.message
    assert issue.hint and "trainJobIntegration: false" in issue.hint and "Trainer 2.2.1" in issue.hint
    # Trainer 2.3.0 stays selectable: without the TrainJob integration nothing is incompatible.
    ok = {"kubernetes": K8S, "components": {"trainer": {"version": "2.3.0"}, "kueue": {"trainJobIntegration": False}}}
    assert validate(ok).warnings == []


def test_trainer_2_1_with_kueue_0_19_is_refused_then_warned_when_allowed() -> None:
    raw: dict[str, Any] = {"kubernetes": K8S, "components": {"trainer": {"version": "2.1.0"}}}
    with pytest.raises(ConfigError) as info:
        validate(raw)
    assert any("[trainer-lacks-runtime-patches]" in i.message for i in info.value.issues)
    loaded = validate({**raw, "allowUnsupportedVersions": True})
    assert any("UNSUPPORTED" in w and "runtimePatches" in w for w in loaded.warnings)


def test_every_error_at_once_with_exit_code_2_and_no_traceback(tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.bad.yaml"
    stack.write_text(
        "config:\n"
        "  trainer-platform:kubernetes: {version: '1.34'}\n"
        "  trainer-platform:components: {kueue: {replicas: 0}, trainer: {versoin: 2.2.1}}\n"
        "  trainer-platfrom:teams: []\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "trainer_infra", "validate", "--config-file", str(stack)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "3 error(s)" in result.stderr
    for path in ("trainer-platfrom:teams", "components.kueue.replicas", "components.trainer.versoin"):
        assert f"  {path}: " in result.stderr
