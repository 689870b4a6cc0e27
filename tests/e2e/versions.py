"""The version set the e2e sandbox builds and runs.

Every binary, CRD folder and upstream manifest is chosen by this one object so
that a version change is a single edit (or environment variable) and lands in
its own build-cache directory.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from trainer_infra.versions import MATRIX

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class VersionSet:
    """Pinned upstream versions (without a leading ``v``)."""

    kubernetes: str = "1.34.4"
    etcd: str = "3.6.16"
    kwok: str = "0.8.0"
    # The platform's own components run at the compatibility matrix's defaults: one place to bump.
    jobset: str = MATRIX.defaults["jobset"]
    kueue: str = MATRIX.defaults["kueue"]
    trainer: str = MATRIX.defaults["trainer"]
    #: LeaderWorkerSet, the controller behind the Trainer data cache.
    lws: str = "0.8.0"
    prometheus: str = "0.305.0"  # Go module version of Prometheus 3.5.0: promtool and the PromQL parser
    prometheus_operator: str = "0.85.0"  # monitoring.coreos.com CRDs, read from its Go module

    @property
    def key(self) -> str:
        """Directory name for build outputs: readable, and unique per set."""
        readable = (
            f"k8s{self.kubernetes}-etcd{self.etcd}-kwok{self.kwok}-js{self.jobset}"
            f"-kueue{self.kueue}-trainer{self.trainer}-lws{self.lws}-prom{self.prometheus}-po{self.prometheus_operator}"
        )
        digest = hashlib.sha256(repr(sorted(asdict(self).items())).encode()).hexdigest()[:8]
        return f"{readable}-{digest}"

    @property
    def kubernetes_minor(self) -> str:
        """``1.34`` from ``1.34.4``: what the stack config calls ``kubernetes.version``."""
        return ".".join(self.kubernetes.split(".")[:2])

    @classmethod
    def from_env(cls) -> VersionSet:
        """Default set, overridable per component with ``E2E_<COMPONENT>_VERSION``."""
        base = cls()
        overrides: dict[str, str] = {}
        for name in asdict(base):
            value = os.environ.get(f"E2E_{name.upper()}_VERSION")
            if value:
                overrides[name] = value.removeprefix("v")
        return replace(base, **overrides)


def cache_root() -> Path:
    """Build outputs live outside the repo so clones and CI runs share them."""
    override = os.environ.get("TRAINER_PLATFORM_E2E_CACHE")
    if override:
        return Path(override)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "trainer-platform" / "e2e"


def shared_dir() -> Path:
    """The project's shared reference folder (CRDs, upstream manifests), read at run time."""
    override = os.environ.get("TRAINER_PLATFORM_SHARED")
    path = Path(override) if override else REPO_ROOT.parent / "shared"
    return path.resolve()
