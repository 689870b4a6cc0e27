"""Ctrl-C and SIGTERM must stop what a run started, never cut that stop short.

Two ways they used to leave a sandbox running: the standard library's ``subprocess.run``/``call`` answer a
KeyboardInterrupt by SIGKILLing their child 0.25 s later, although that child (in the same process group as the
terminal's Ctrl-C) is busy stopping what *it* started (a pytest session tearing down its fixtures, ``pulumi`` ending
its plugins); and a second signal during a stop raised in the middle of it, skipping the steps after.
``wait_to_end`` waits for such a child; ``uninterruptible`` makes a stop finish before the signal takes effect.
"""

from __future__ import annotations

import functools
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")
#: the signals a person or a CI runner stops a run with
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def uninterruptible(stop: Callable[P, R]) -> Callable[P, R]:
    """``stop`` runs to its end: a SIGINT or SIGTERM received meanwhile is held and raised again once it returned
    (KeyboardInterrupt, SystemExit, whatever the handler before it does). In the main thread only (the only one
    Python delivers signals to); nested stops hold it for the outermost."""

    @functools.wraps(stop)
    def shielded(*args: P.args, **kwargs: P.kwargs) -> R:
        if threading.current_thread() is not threading.main_thread():
            return stop(*args, **kwargs)
        held: list[int] = []

        def hold(signum: int, frame: FrameType | None) -> None:
            if not held:
                print(
                    f"[sandbox] {signal.Signals(signum).name} received: it takes effect once "
                    f"{stop.__qualname__} has stopped everything",
                    file=sys.stderr,
                    flush=True,
                )
            held.append(signum)

        previous = {signum: signal.signal(signum, hold) for signum in STOP_SIGNALS}
        try:
            return stop(*args, **kwargs)
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            if held:
                signal.raise_signal(held[0])

    return shielded


def wait_to_end(proc: subprocess.Popen[Any], timeout: float | None = None) -> tuple[Any, Any]:
    """``proc.communicate(timeout=timeout)``, waited on through Ctrl-C: the child is in the terminal's process group,
    got the same SIGINT and is stopping what it started; it is never killed for it (``subprocess.run`` would SIGKILL
    it, leaving that running). A SIGTERM sent to this process (``kill``, a CI runner) is passed on to the child.
    Either is raised again once the child exited (KeyboardInterrupt; SIGTERM as its handler before says). On the
    timeout the child is killed (it got no signal it could stop on) and ``TimeoutExpired`` raised, as
    ``subprocess.run`` does."""
    held: list[int] = []

    def pass_on(signum: int, frame: FrameType | None) -> None:
        held.append(signum)
        proc.send_signal(signum)

    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, pass_on) if main else None
    try:
        while True:
            try:
                out, err = proc.communicate(timeout=None if held else timeout)
                break
            except KeyboardInterrupt:
                if not held:
                    print(f"[e2e] interrupted: waiting for pid {proc.pid} to stop what it started", flush=True)
                held.append(signal.SIGINT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
                raise
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    if held:
        signal.raise_signal(held[0])
    return out, err
