"""Every upstream name is written once, in `trainer_infra/core/upstream/`.

A label, annotation, API group or version, controller, framework, resource or driver name that Kubernetes or a
project the platform drives defines (Kueue, Trainer, JobSet, Karpenter, a device vendor, a cloud) is read from
there; spelled anywhere else it drifts the day upstream renames it. The scan reads each module's string
constants (f-string parts included), not its docstrings or comments, so prose may still name them.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from pathlib import Path

import pytest

from trainer_infra.core.upstream import trainer
from trainer_infra.manifests.runtime import TRAINER_API_VERSION
from trainer_infra.versions import MATRIX

PACKAGE = Path(__file__).resolve().parents[1] / "trainer_infra"
HOME = "core/upstream/*"

#: The domains upstream names live under (labels, annotations, API groups, resources, drivers, images).
UPSTREAM = re.compile(
    r"k8s\.io|kubernetes\.io|kubeflow\.org|nvidia\.com|amd\.com|intel\.com|habana\.ai|huawei\.com|google\.com/"
    r"|k8s\.aws|aws\.com|amazonaws\.com|gke\.io|azure\.com|karpenter\.|coreos\.com|cert-manager\.io|ray\.io"
)

#: Modules that cannot import the package, with the reason.
STANDALONE = {
    "platform/crd_order.py": "Helm's post-renderer: Pulumi's provider runs its source with `python3 -c`",
}

#: Files other branches are rewriting while this rule landed; drained after their merge (then this list goes).
PENDING = (
    "sandbox/*",
    "simulate/*",
)


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def upstream_literals(source: str) -> list[tuple[int, str]]:
    """(line, string) of every string constant outside a docstring that holds an upstream name."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    return sorted(
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docstrings
        and UPSTREAM.search(node.value)
    )


def _modules() -> dict[str, str]:
    return {p.relative_to(PACKAGE).as_posix(): p.read_text() for p in sorted(PACKAGE.rglob("*.py"))}


def _exempt(path: str) -> bool:
    return path in STANDALONE or any(fnmatch.fnmatch(path, pattern) for pattern in (HOME, *PENDING))


def test_scan_finds_names_in_code_and_skips_docstrings() -> None:
    source = '''"""Reads kueue.x-k8s.io/queue-name."""
# a comment: nvidia.com/gpu
def f(team: str) -> dict[str, str]:
    """Labels it with kubernetes.io/hostname."""
    return {"kueue.x-k8s.io/queue-name": team, f"{team}.nvidia.com/gpu": "1", "trainer-platform.io/team": team}
'''
    assert upstream_literals(source) == [(5, ".nvidia.com/gpu"), (5, "kueue.x-k8s.io/queue-name")]


def test_upstream_names_are_written_only_in_core_upstream() -> None:
    found = [
        f"trainer_infra/{path}:{line}: {value!r}"
        for path, source in _modules().items()
        if not _exempt(path)
        for line, value in upstream_literals(source)
    ]
    assert not found, (
        "upstream names spelled outside trainer_infra/core/upstream/ (add the name to that project's module there "
        "and import it):\n" + "\n".join(found)
    )


@pytest.mark.parametrize("pattern", PENDING)
def test_pending_entries_still_hold_names(pattern: str) -> None:
    """An allow-list entry whose files hold no upstream name any more is removed, so the list only shrinks."""
    held = [p for p, source in _modules().items() if fnmatch.fnmatch(p, pattern) and upstream_literals(source)]
    assert held, f"{pattern} holds no upstream name: remove it from PENDING"


def test_trainer_api_of_the_policy_layer_is_every_releases() -> None:
    """`manifests/` (read by the CrossGuard pack, standard library only) cannot read the YAML matrix, so it
    writes the Trainer API version; every matrix release of Trainer must serve that one."""
    served = {r.version: r.api_version(trainer.GROUP) for r in MATRIX.components["trainer"].releases}
    assert set(served.values()) == {TRAINER_API_VERSION}, served
