"""An upgrade upstream says is unsafe is refused with the path to take (`validate --base/--previous`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import MINIMAL, render
from trainer_infra.cli import main
from trainer_infra.render.output import write
from trainer_infra.versions.upgrade import check_upgrade, unmigrated


def _refusals(deployed: dict[str, str], target: dict[str, str], allow: bool = False) -> list[str]:
    return [i.render() for i in check_upgrade(deployed, target, allow_unsupported=allow).refused]


def test_trainer_must_pass_through_2_3() -> None:
    (refused,) = _refusals({"trainer": "2.2.1"}, {"trainer": "2.4.0"})
    assert refused.startswith("components.trainer.version: trainer 2.2.1 → 2.4.0 skips a required release")
    assert "first `pulumi up` with components.trainer.version: 2.3.0, then 2.4.0" in refused
    assert "kubeflow/trainer v2.3.0 release notes" in refused
    assert _refusals({"trainer": "2.2.1"}, {"trainer": "2.3.0"}) == []
    assert _refusals({"trainer": "2.3.0"}, {"trainer": "2.4.0"}) == []


def test_a_downgrade_and_an_unknown_start_are_refused() -> None:
    (down,) = _refusals({"jobset": "0.12.0"}, {"jobset": "0.11.1"})
    assert "a downgrade of jobset from the deployed 0.12.0" in down and "keep components.jobset.version: 0.12.0" in down
    (kueue_down,) = _refusals({"kueue": "0.19.2"}, {"kueue": "0.18.3"})
    assert "a downgrade of kueue from the deployed 0.19.2" in kueue_down
    # Kueue 0.17 → 0.19: the matrix knows no 0.17 row, so the path goes through the release it knows
    (unknown,) = _refusals({"kueue": "0.17.1"}, {"kueue": "0.19.2"})
    assert "the matrix does not know an upgrade of kueue from the deployed 0.17.1" in unknown
    assert "the matrix upgrades kueue from 0.19.2, 0.18.3: upgrade to one of them first" in unknown
    # the documented escape hatch turns only the unknown start into a warning, never a downgrade
    allowed = check_upgrade({"kueue": "0.17.1"}, {"kueue": "0.19.2"}, allow_unsupported=True)
    assert allowed.refused == [] and "UNSUPPORTED" in allowed.warnings[0]
    assert _refusals({"jobset": "0.12.0"}, {"jobset": "0.11.1"}, allow=True) == [down]
    # the upgrades the e2e runs with jobs in flight (tests/e2e/test_pulumi_upgrade.py) are accepted, warning-free
    for deployed, target in ({"jobset": "0.11.1"}, {"jobset": "0.12.0"}), ({"kueue": "0.18.3"}, {"kueue": "0.19.2"}):
        accepted = check_upgrade(deployed, target, allow_unsupported=False)
        assert (accepted.refused, accepted.warnings, accepted.migrations) == ([], [], [])
    # a first install and a no-op are not upgrades
    assert _refusals({}, {"kueue": "0.19.2"}) == _refusals({"kueue": "0.19.2"}, {"kueue": "0.19.2"}) == []


def _crd(name: str, stored: list[str]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"group": "kueue.x-k8s.io"}, "status": {"storedVersions": stored}}


def test_kueue_0_20_waits_for_v1beta1_objects_to_be_migrated() -> None:
    check = check_upgrade({"kueue": "0.19.2"}, {"kueue": "0.20.6"}, allow_unsupported=False)
    assert check.refused == [] and [r.id for r in check.migrations] == ["kueue-v1beta1-unserved"]
    assert "status.storedVersions" in check.warnings[0]  # offline: said, checked where the cluster is read
    crds = [_crd("workloads.kueue.x-k8s.io", ["v1beta1", "v1beta2"]), _crd("cohorts.kueue.x-k8s.io", ["v1beta2"])]
    (issue,) = unmigrated(check.migrations, crds)
    assert issue.found == "status.storedVersions of workloads.kueue.x-k8s.io list v1beta1"
    assert unmigrated(check.migrations, [_crd("workloads.kueue.x-k8s.io", ["v1beta2"])]) == []


def _stack(path: Path, jobset: str, kueue: str | None = None) -> Path:
    components = {"jobset": {"version": jobset}} | ({"kueue": {"version": kueue}} if kueue else {})
    raw = {**MINIMAL, "components": components}
    path.write_text(yaml.safe_dump({"config": {f"trainer-platform:{k}": v for k, v in raw.items()}}))
    return path


@pytest.mark.parametrize("as_render", [True, False])
def test_validate_previous_refuses_a_downgrade_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], as_render: bool
) -> None:
    previous = _stack(tmp_path / "Pulumi.deployed.yaml", "0.12.0")
    if as_render:
        write(render({**MINIMAL, "components": {"jobset": {"version": "0.12.0"}}}), tmp_path / "deployed")
        previous = tmp_path / "deployed"
    current = _stack(tmp_path / "Pulumi.dev.yaml", "0.11.1")
    assert main(["validate", "--config-file", str(current), "--previous", str(previous)]) == 2
    err = capsys.readouterr().err
    assert f"in the change from {previous}" in err and "a downgrade of jobset from the deployed 0.12.0" in err
    assert (
        main(
            [
                "validate",
                "--config-file",
                str(_stack(tmp_path / "Pulumi.x.yaml", "0.12.0")),
                "--previous",
                str(previous),
            ]
        )
        == 0
    )


@pytest.mark.parametrize(
    ("deployed", "target", "said"),
    [
        ("0.19.2", "0.18.3", "a downgrade of kueue from the deployed 0.19.2"),
        ("0.17.1", "0.19.2", "upgrade to one of them first"),
    ],
)
def test_validate_previous_refuses_a_kueue_downgrade_or_unknown_start_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], deployed: str, target: str, said: str
) -> None:
    previous = _stack(tmp_path / "Pulumi.deployed.yaml", "0.12.0", deployed)
    if deployed not in ("0.19.2", "0.18.3"):  # a release the matrix lacks is written down as allowed then
        doc = yaml.safe_load(previous.read_text())
        doc["config"]["trainer-platform:allowUnsupportedVersions"] = True
        previous.write_text(yaml.safe_dump(doc))
    current = _stack(tmp_path / "Pulumi.dev.yaml", "0.12.0", target)
    assert main(["validate", "--config-file", str(current), "--previous", str(previous)]) == 2
    err = capsys.readouterr().err
    assert "components.kueue.version" in err and said in err
    # the path it names: from 0.18.3 (the e2e's start), on to 0.19.2
    step, default = (
        _stack(tmp_path / "Pulumi.step.yaml", "0.12.0", "0.18.3"),
        _stack(tmp_path / "Pulumi.default.yaml", "0.12.0"),
    )
    assert main(["validate", "--config-file", str(default), "--previous", str(step)]) == 0
