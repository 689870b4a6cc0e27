"""Issue #27 item 7: a stack that enables the data cache without what bounds its initializer is refused."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.helpers import stack_raw
from trainer_infra.core.errors import ConfigError
from trainer_infra.datacache.pinned import CACHE_INITIALIZER
from trainer_infra.stack.validate import validate


def _system_priority(raw: dict[str, Any]) -> None:
    raw.setdefault("tenancy", {})["priorityClasses"] = ["system-node-critical"]


def _cache_account_as_member(raw: dict[str, Any]) -> None:
    raw["teams"][0]["members"]["serviceAccounts"] = [f"nlp/{CACHE_INITIALIZER}"]


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (_system_priority, "tenancy.priorityClasses[0]"),
        (_cache_account_as_member, "teams[0].members.serviceAccounts[0]"),
    ],
)
def test_validate_refuses_a_data_cache_without_its_protections(
    change: Callable[[dict[str, Any]], None], path: str
) -> None:
    raw = stack_raw("local")
    assert raw["dataCache"]["enabled"] is True
    change(raw)
    with pytest.raises(ConfigError) as err:
        validate(raw)
    assert [i.path for i in err.value.issues] == [path], [i.render() for i in err.value.issues]
    if change is _system_priority:  # without the data cache the same classes are the operator's choice
        raw["dataCache"] = {"enabled": False}
        validate(raw)
