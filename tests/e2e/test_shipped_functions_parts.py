"""The functions the e2e hands to the kubeflow SDK (`CustomTrainer(func=...)`) run in the trainer container from
their source alone: the SDK ships `inspect.getsource(func)` and a call, not the module. A name the function takes
from its module (an `import os` at the top of the test file) is a NameError at the job's first line, seen only as
a failed job minutes into the e2e. Checked here, in `make test`, without a cluster."""

from __future__ import annotations

import builtins
import dis
from collections.abc import Callable, Iterator
from types import CodeType

import pytest

from tests.e2e import test_attacks, test_sandbox_progress, test_sandbox_queue, test_sandbox_training, test_scenarios

SHIPPED: tuple[Callable[[], None], ...] = (
    test_attacks._train,
    test_sandbox_progress.report_progress,
    test_sandbox_queue.train_until_preempted,
    test_sandbox_queue.say_done,
    test_sandbox_training.train_resumable,
    test_sandbox_training.exceed_memory,
    test_scenarios.train_fn,
)


def _codes(code: CodeType) -> Iterator[CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield from _codes(const)


def module_names(func: Callable[[], None]) -> set[str]:
    """The names the function (and what it nests) reads from its module: neither its own nor a builtin."""
    return {
        ins.argval
        for code in _codes(func.__code__)
        for ins in dis.get_instructions(code)
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and not hasattr(builtins, ins.argval)
    }


@pytest.mark.parametrize("func", SHIPPED, ids=lambda f: f"{f.__module__.rsplit('.', 1)[-1]}.{f.__name__}")
def test_a_shipped_function_imports_all_it_uses(func: Callable[[], None]) -> None:
    assert not module_names(func), f"{func.__name__} uses its module's {sorted(module_names(func))}: import them inside"


def test_the_check_sees_a_module_import() -> None:
    import os

    def uses_the_module() -> None:
        print(os.getcwd(), dis.__name__)

    # `os` comes from the enclosing function here, `dis` from the module
    assert module_names(uses_the_module) == {"dis"}
