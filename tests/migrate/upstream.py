"""The upstream v1 API, read at test time: the Training Operator v1.9.4 CRDs from the shared reference
folder (TRAINER_PLATFORM_CRDS, default ../shared/crds) and the MPI Operator's v2beta1 MPIJob CRD from its
Go module (the version Kueue 0.19.2 builds against), downloaded through the Go module proxy."""

from __future__ import annotations

import json
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from tests.conformance.crds import crds_dir

TRAINING_OPERATOR = "1.9.4"
MPI_OPERATOR = ("github.com/kubeflow/mpi-operator", "v0.8.2")  # sigs.k8s.io/kueue v0.19.2 go.mod
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def v1_crd_dir() -> Path:
    return crds_dir() / "training-operator-v1" / f"v{TRAINING_OPERATOR}"


@cache
def go_module(module: str, version: str) -> Path | None:
    """The module's source directory in Go's module cache, or None without a Go toolchain."""
    if shutil.which("go") is None:
        return None
    proc = subprocess.run(
        ["go", "mod", "download", "-json", f"{module}@{version}"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd="/",
        env=None,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"go mod download {module}@{version}: {proc.stdout[-1000:]}{proc.stderr[-1000:]}")
    return Path(json.loads(proc.stdout)["Dir"])


@cache
def schemas() -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) → openAPIV3Schema of every v1 job kind the converter reads."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    files = sorted(v1_crd_dir().glob("*.yaml"))
    mpi = go_module(*MPI_OPERATOR)
    if mpi is not None:
        files.append(mpi / "manifests" / "base" / "kubeflow.org_mpijobs.yaml")
    for path in files:
        crd = yaml.load(path.read_text(), Loader=_Loader)
        for v in crd["spec"]["versions"]:
            out[(f"{crd['spec']['group']}/{v['name']}", crd["spec"]["names"]["kind"])] = v["schema"]["openAPIV3Schema"]
    return out
