"""Render a stack at a git ref and in the working tree, each with its own code.

The base is checked out into a temporary `git worktree` and rendered by that checkout's own
`python -m trainer_infra render` (PYTHONPATH = the checkout, the current interpreter so the
dependencies are the ones installed here). The working tree is rendered the same way, in a second
process at the same time: renders share Pulumi's global mock state, so each gets its own process.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from trainer_infra.diff.compare import Render

POLICY_EXIT = 3  # render wrote its files but a policy rule failed: still a render to compare
EMPTY = Render([], [], [])


class DiffError(Exception):
    """Something other than a difference: no git, unknown ref, a render that failed."""


def _git(root: Path, *args: str) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise DiffError("git is not installed") from None
    if done.returncode != 0:
        raise DiffError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def repo_root(start: Path) -> Path:
    return Path(_git(start, "rev-parse", "--show-toplevel"))


def resolve(root: Path, ref: str) -> str:
    return _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")


@contextlib.contextmanager
def checkout(root: Path, commit: str) -> Iterator[Path]:
    """A detached worktree of `commit`, removed afterwards (also when rendering fails)."""
    with tempfile.TemporaryDirectory(prefix="trainer-infra-diff-") as tmp:
        path = Path(tmp) / "base"
        _git(root, "worktree", "add", "--detach", "--quiet", str(path), commit)
        try:
            yield path
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=root, capture_output=True)
            subprocess.run(["git", "worktree", "prune"], cwd=root, capture_output=True)


def load(out: Path) -> Render:
    """The three files `trainer-infra render` writes, as data."""
    manifests = [d for d in yaml.safe_load_all((out / "manifests.yaml").read_text()) if d]
    releases = (yaml.safe_load((out / "helm-releases.yaml").read_text()) or {}).get("releases") or []
    resources = json.loads((out / "resources.json").read_text())
    return Render(manifests, releases, resources)


def _start(code: Path, config: Path, out: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(code), "PYTHONDONTWRITEBYTECODE": "1"}
    cmd = [sys.executable, "-m", "trainer_infra", "render", "--config-file", str(config), "--out", str(out)]
    return subprocess.Popen(cmd, cwd=code, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc: subprocess.Popen[str], out: Path, what: str) -> Render:
    stdout, stderr = proc.communicate()
    if proc.returncode not in (0, POLICY_EXIT) or not (out / "resources.json").exists():
        detail = (stderr or stdout).strip().splitlines()[-15:]
        raise DiffError(f"rendering {what} failed (exit {proc.returncode}):\n  " + "\n  ".join(detail))
    return load(out)


@dataclass(frozen=True)
class Renders:
    base: Render
    head: Render
    base_commit: str
    base_has_stack: bool


def render_both(root: Path, config: Path, base_ref: str) -> Renders:
    """Render `config` (a stack file) at `base_ref` and in the working tree. A stack file inside the
    repository is taken from the base commit at the same path (absent there: a new stack, the base
    is empty); a file outside the repository is the same for both, so only the code differs."""
    commit = resolve(root, base_ref)
    config = config.resolve()
    inside = config.is_relative_to(root.resolve())
    with tempfile.TemporaryDirectory(prefix="trainer-infra-render-") as tmp, checkout(root, commit) as base:
        base_config = base / config.relative_to(root.resolve()) if inside else config
        head_proc = _start(root, config, Path(tmp) / "head")
        base_proc = _start(base, base_config, Path(tmp) / "base") if base_config.exists() else None
        head = _finish(head_proc, Path(tmp) / "head", "the working tree")
        base_render = _finish(base_proc, Path(tmp) / "base", f"{base_ref} ({commit[:12]})") if base_proc else EMPTY
    return Renders(base_render, head, commit, base_proc is not None)


@contextlib.contextmanager
def rendered_at(root: Path, config: Path, base_ref: str) -> Iterator[Path | None]:
    """The render directory of `config` (a stack file in the repository) at `base_ref`, rendered with that
    commit's code; None when the stack file does not exist there (a new stack)."""
    commit = resolve(root, base_ref)
    config = config.resolve()
    with tempfile.TemporaryDirectory(prefix="trainer-infra-render-") as tmp, checkout(root, commit) as base:
        base_config = base / config.relative_to(root.resolve())
        if not base_config.exists():
            yield None
            return
        out = Path(tmp) / "base"
        _finish(_start(base, base_config, out), out, f"{base_ref} ({commit[:12]})")
        yield out
