"""Kueue's wall-clock timers under compression: the simulation raises the PodsReady timeout the control plane's
own latency could reach and scales the requeue backoff to the same trace time; nothing else changes."""

from __future__ import annotations

from typing import Any

import pytest

from trainer_infra.simulate.timers import TIMEOUT_FLOOR, compressed_settings, seconds

STACK: dict[str, Any] = {
    "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare"]},
    "waitForPodsReady": {
        "timeout": "1m",
        "blockAdmission": False,
        "requeuingStrategy": {"backoffBaseSeconds": 60, "backoffMaxSeconds": 3600, "backoffLimitCount": 3},
    },
}


def test_timeout_raised_backoff_scaled_and_the_rest_kept() -> None:
    out, changes = compressed_settings(STACK, 300)
    wait = out["waitForPodsReady"]
    assert seconds(wait["timeout"]) == TIMEOUT_FLOOR
    # 60 s and 3600 s of trace time at 300×: 1 s (Kueue counts whole seconds, at least 1) and 12 s
    assert wait["requeuingStrategy"] == {"backoffBaseSeconds": 1, "backoffMaxSeconds": 12, "backoffLimitCount": 3}
    assert wait["blockAdmission"] is False and out["fairSharing"] == STACK["fairSharing"]
    assert len(changes) == 3 and "1m → 600s" in changes[0]
    assert STACK["waitForPodsReady"]["timeout"] == "1m", "the stack's settings are not changed in place"


def test_a_long_timeout_and_no_compression_stay_as_they_are() -> None:
    settings = {"waitForPodsReady": {"timeout": "30m", "requeuingStrategy": {"backoffBaseSeconds": 60}}}
    assert compressed_settings(settings, 1) == (settings, [])
    assert compressed_settings({}, 900) == ({}, [])


@pytest.mark.parametrize(("text", "value"), [("1h30m", 5400.0), ("45s", 45.0), ("500ms", 0.5), ("1.5m", 90.0)])
def test_go_durations(text: str, value: float) -> None:
    assert seconds(text) == value


def test_not_a_duration() -> None:
    with pytest.raises(ValueError, match="not a duration"):
        seconds("10 minutes")
