"""The stacks we ship are the first thing a newcomer runs: `validate` passes them without a single warning."""

from __future__ import annotations

import pytest

from tests.helpers import MINIMAL, render, with_changes
from tests.render.test_render import ALL_STACKS
from trainer_infra.cli import main
from trainer_infra.stack.validate import validate


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_every_shipped_stack_validates_without_a_warning(stack: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--stack", stack]) == 0
    assert "WARNING" not in capsys.readouterr().err


def test_a_team_secret_value_declared_plaintext_is_no_warning_but_still_a_secret() -> None:
    def team(value: object) -> dict[str, object]:
        return with_changes(
            MINIMAL,
            teams=[{"name": "a", "secrets": {"extra": {"wandb": {"WANDB_MODE": value}}}}],
            tenancy={"images": {"allowedRegistries": ["registry.corp"]}},  # no other warning
        )

    assert validate(team({"plaintext": "offline"})).warnings == []
    (warning,) = validate(team("offline")).warnings
    assert warning.startswith("teams[0].secrets.extra.wandb.WANDB_MODE: a secret in plain text")
    assert "{plaintext: <value>}" in warning
    secrets = [m for m in render(team({"plaintext": "offline"})).manifests if m["kind"] == "Secret"]
    assert [(s["metadata"]["name"], s["stringData"]) for s in secrets] == [("wandb", {"WANDB_MODE": "<secret>"})]
