"""Where the upstream CRD files come from: the shared reference folder, or a pinned, checksummed fetch."""

from __future__ import annotations

import hashlib
import os
import urllib.request
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from trainer_infra.sandbox.versions import VersionSet, monitoring_crd_files, shared_dir

ENV = "TRAINER_PLATFORM_CRDS"
REPO_ROOT = Path(__file__).resolve().parents[2]
# libyaml's loader parses the ~1 MB Trainer CRDs 30x faster than pure Python (0.2 s vs 5.5 s each).
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "trainer-platform" / "crds"


def _sources() -> list[dict[str, str]]:
    text = resources.files("tests.conformance").joinpath("crd_sources.yaml").read_text()
    files: list[dict[str, str]] = yaml.safe_load(text)["files"]
    return files


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fetch_pinned(cache: Path = CACHE, opener: Any = urllib.request.urlopen) -> Path:
    """Download every pinned CRD not yet cached; refuse any whose sha256 differs from the pin."""
    for entry in _sources():
        target = cache / entry["path"]
        if target.is_file() and _sha256(target.read_bytes()) == entry["sha256"]:
            continue
        try:
            with opener(entry["url"], timeout=60) as response:
                data = response.read()
        except OSError as exc:  # URLError, timeouts, refused connections: no network here
            raise RuntimeError(
                f"the upstream CRDs are not in {shared_dir() / 'crds'} and the pinned download of {entry['url']} "
                f"failed ({exc}): put the shared reference folder beside the repository, or point "
                f"TRAINER_PLATFORM_SHARED (or {ENV}) at it"
            ) from None
        if _sha256(data) != entry["sha256"]:
            raise RuntimeError(f"{entry['url']}: sha256 {_sha256(data)} != pinned {entry['sha256']}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return cache


def crds_dir() -> Path:
    """TRAINER_PLATFORM_CRDS, else the shared folder's crds/ (TRAINER_PLATFORM_SHARED, default ../shared), else
    the pinned fetch into the cache."""
    configured = os.environ.get(ENV)
    if configured:
        return Path(configured)
    shared = shared_dir() / "crds"
    return shared if shared.is_dir() else fetch_pinned()


@cache
def load_crds(root: str, component: str, version: str) -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) → the served version's openAPIV3Schema, for one component release."""
    folder = Path(root) / component / f"v{version}"
    if not folder.is_dir():
        raise FileNotFoundError(f"no CRDs for {component} {version} in {folder}")
    return _schemas(tuple(sorted(folder.glob("*.yaml"))))


@cache
def monitoring_crds() -> dict[tuple[str, str], dict[str, Any]]:
    """The monitoring.coreos.com kinds the observability block creates, from the pinned
    prometheus-operator Go module (the same files the e2e sandbox installs)."""
    return _schemas(tuple(monitoring_crd_files(VersionSet().prometheus_operator)))


def _schemas(paths: tuple[Path, ...]) -> dict[tuple[str, str], dict[str, Any]]:
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for path in paths:
        crd = yaml.load(path.read_text(), Loader=_Loader)  # a safe loader (C or pure Python)
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for v in crd["spec"]["versions"]:
            if v.get("served", True):
                out[(f"{group}/{v['name']}", kind)] = {
                    "schema": v["schema"]["openAPIV3Schema"],
                    "scope": crd["spec"]["scope"],
                    "deprecated": bool(v.get("deprecated", False)),
                }
    return out
