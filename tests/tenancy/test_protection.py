"""Never lose team data: protected by default, and a change that would delete or replace it is refused."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import MINIMAL, render, resource
from trainer_infra.cli import main
from trainer_infra.render.output import write

BASE: dict[str, Any] = {
    **MINIMAL,
    "storage": {"nfs": {"server": "10.0.0.2", "share": "/exports"}},
    "tenancy": {"images": {"allowedRegistries": ["registry.corp"]}},  # a stack validate has nothing to warn about
    "teams": [
        {"name": "nlp", "members": {"users": ["alice"]}, "storage": {"size": "100Gi"}},
        {"name": "vision", "members": {"users": ["bob"]}},
    ],
}
DATA = ("namespace-nlp", "persistentvolumeclaim-nlp-workspace", "storageclass-trainer-platform-shared")


def _protection(raw: dict[str, Any], name: str) -> tuple[bool, bool]:
    r = resource(render(raw), name)
    return r["protect"], r["retainOnDelete"]


def test_team_namespaces_claims_and_retain_classes_are_protected_in_resources_json() -> None:
    rendered = render(BASE)
    for name in DATA:
        r = resource(rendered, name)
        assert (r["protect"], r["retainOnDelete"]) == (True, True), name
    assert resource(rendered, "rolebinding-nlp-trainer-platform-team-member")["protect"] is False


def test_decommission_unprotects_one_team_and_allow_data_loss_everything() -> None:
    raw = copy.deepcopy(BASE)
    raw["teams"][1]["decommission"] = True
    rendered = render(raw)
    assert not resource(rendered, "namespace-vision")["protect"]
    assert not resource(rendered, "persistentvolumeclaim-vision-workspace")["retainOnDelete"]
    assert (
        resource(rendered, "namespace-nlp")["protect"]
        and resource(rendered, "storageclass-trainer-platform-shared")["protect"]
    )
    everything = render({**BASE, "allowDataLoss": True})
    assert not any(resource(everything, n)["protect"] for n in DATA)
    delete_class = render({**BASE, "storage": {**BASE["storage"], "reclaimPolicy": "Delete"}})
    assert not resource(delete_class, "storageclass-trainer-platform-shared")["protect"], "nothing retained to guard"


def _stack_file(path: Path, raw: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump({"config": {f"trainer-platform:{k}": v for k, v in raw.items()}}))
    return path


def _validate(tmp_path: Path, previous: dict[str, Any], current: dict[str, Any], as_render: bool = False) -> int:
    prev: Path
    if as_render:
        prev = tmp_path / "previous-render"
        write(render(previous), prev)
    else:
        prev = _stack_file(tmp_path / "Pulumi.previous.yaml", previous)
    cur = _stack_file(tmp_path / "Pulumi.current.yaml", current)
    return main(["validate", "--config-file", str(cur), "--previous", str(prev)])


def _changed(**edits: Any) -> dict[str, Any]:
    raw = copy.deepcopy(BASE)
    for key, value in edits.items():
        if key == "drop_vision":
            raw["teams"] = raw["teams"][:1]
        elif key == "vision_namespace":
            raw["teams"][1]["namespace"] = value
        elif key == "server":
            raw["storage"]["nfs"]["server"] = value
        elif key == "class_name":
            raw["storage"]["className"] = value
        elif key == "nlp_size":
            raw["teams"][0]["storage"]["size"] = value
    return raw


@pytest.mark.parametrize(
    ("current", "as_render", "expected"),
    [
        (
            _changed(drop_vision=True),
            True,
            [
                "teams (team 'vision' removed): would delete namespace vision",
                "would delete claim vision/workspace",
                "decommission: true",
            ],
        ),
        (
            _changed(vision_namespace="cv"),
            False,
            ["would delete namespace vision", "would delete claim vision/workspace"],
        ),
        (
            _changed(server="10.0.0.3"),
            False,
            ["storage: changing parameters replaces StorageClass trainer-platform-shared", "allowDataLoss: true"],
        ),
        (
            _changed(class_name="shared-v2"),
            True,
            [
                "teams[0].storage: changing spec.storageClassName replaces claim nlp/workspace",
                "storage: would delete StorageClass trainer-platform-shared",
            ],
        ),
        (_changed(nlp_size="50Gi"), False, ["teams[0].storage: would shrink claim nlp/workspace from 100Gi to 50Gi"]),
    ],
    ids=["remove-team", "rename-namespace", "change-backend", "change-class", "shrink-claim"],
)
def test_a_change_that_loses_protected_data_is_refused_with_what_is_lost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], current: dict[str, Any], as_render: bool, expected: list[str]
) -> None:
    assert _validate(tmp_path, BASE, current, as_render) == 2
    err = capsys.readouterr().err
    for text in expected:
        assert text in err, err


def test_decommission_then_remove_goes_through_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    step1 = copy.deepcopy(BASE)
    step1["teams"][1]["decommission"] = True
    assert _validate(tmp_path, BASE, step1) == 0
    assert "teams[1]: namespace vision with everything in it" in capsys.readouterr().err
    assert _validate(tmp_path, step1, _changed(drop_vision=True)) == 0
    assert "will DELETE namespace vision" in capsys.readouterr().err


def test_growing_a_claim_and_adding_a_team_are_plain_updates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    grown = _changed(nlp_size="2Ti")
    grown["teams"].append({"name": "speech"})
    assert _validate(tmp_path, BASE, grown, as_render=True) == 0
    assert capsys.readouterr().err == ""
