"""The version set the e2e sandbox builds and runs (defined in trainer_infra/sandbox/versions.py, which
`simulate` shares); REPO_ROOT is the checkout the tests run in."""

from __future__ import annotations

from pathlib import Path

from trainer_infra.sandbox.versions import VersionSet, cache_root, shared_dir

REPO_ROOT = Path(__file__).resolve().parents[2]

__all__ = ["REPO_ROOT", "VersionSet", "cache_root", "shared_dir"]
