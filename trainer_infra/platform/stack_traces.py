"""One frame of Python stack per resource in the state, not the whole call stack.

The Python SDK sends the engine the call stack of every resource it registers (``_get_stack_trace``: about 18
frames, 1.9 KB for our resources, down through asyncio and the language host), and the engine keeps it in the
state. On a DIY backend the whole state is rewritten after every step (pulumi#10960), so those traces were 40 % of
every checkpoint of a team stack (docs/large-organisations.md). The first frame, where the resource was
constructed, is what the engine shows as the resource's source position and in its errors; it is kept.

The SDK has no switch for this, so the private function is wrapped. If a later SDK renames it, nothing is
trimmed and nothing else changes (``trim_stack_traces`` returns False; a unit test pins the SDK we depend on).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: the frames kept: the resource's own registration site (what the engine calls its source position)
KEPT_FRAMES = 1


def trim_stack_traces() -> bool:
    """Wrap the SDK's stack capture so that the state keeps ``KEPT_FRAMES`` frames; idempotent."""
    from pulumi.runtime import resource as sdk

    original: Callable[[], Any] | None = getattr(sdk, "_get_stack_trace", None)
    if original is None:
        return False
    if getattr(original, "trimmed", False):
        return True

    def trimmed() -> Any:
        trace = original()
        return type(trace)(frames=list(trace.frames)[:KEPT_FRAMES])

    trimmed.trimmed = True  # type: ignore[attr-defined]
    sdk._get_stack_trace = trimmed
    return True
