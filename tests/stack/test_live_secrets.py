"""Under `pulumi up` the program sees the config as the engine hands it over: every value decrypted, and the
list of top-level keys that hold a secret. A value stored with `pulumi config set --secret` must not be
reported as plain text there (the offline `validate`, which reads the file itself, keeps naming real ones)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from pulumi.runtime.config import _SECRET_KEYS, CONFIG, set_all_config

from tests.helpers import stack_raw
from trainer_infra.program import load_from_pulumi
from trainer_infra.stack.load import NAMESPACE

TOKEN = "hf_live_value_0123456789"


@pytest.fixture
def engine_config() -> Iterator[Any]:
    """Set the program's config the way the language host does (structured values as JSON text)."""
    config_token, keys_token = CONFIG.set({}), _SECRET_KEYS.set(set())

    def hand_over(raw: dict[str, Any], secret_keys: list[str]) -> None:
        values = {f"{NAMESPACE}:{k}": v if isinstance(v, str) else json.dumps(v) for k, v in raw.items()}
        set_all_config(values, [f"{NAMESPACE}:{k}" for k in secret_keys])

    yield hand_over
    CONFIG.reset(config_token)
    _SECRET_KEYS.reset(keys_token)


def _with_token() -> dict[str, Any]:
    raw = stack_raw("local")
    raw["teams"][0]["secrets"] = {"hfToken": TOKEN}
    return raw


def test_a_secret_set_with_pulumi_config_set_secret_is_not_called_plain_text(engine_config: Any) -> None:
    engine_config(_with_token(), ["teams"])
    warnings = load_from_pulumi().warnings
    assert not [w for w in warnings if "plain text" in w], warnings
    assert not [w for w in warnings if TOKEN in w]


def test_a_secret_written_in_plain_text_is_still_named_live(engine_config: Any) -> None:
    engine_config(_with_token(), [])
    warnings = load_from_pulumi().warnings
    assert any(
        "teams[0].secrets.hfToken: a secret in plain text" in w
        and "pulumi config set --secret --path 'trainer-platform:teams[0].secrets.hfToken'" in w
        for w in warnings
    ), warnings
    assert not [w for w in warnings if TOKEN in w]
