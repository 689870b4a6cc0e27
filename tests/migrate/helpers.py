"""Shared fixtures for the migrate tests: the local stack as a migration target and minimal v1 jobs."""

from __future__ import annotations

import copy
import dataclasses
from functools import cache
from pathlib import Path
from typing import Any

from tests.helpers import stack_raw
from trainer_infra.migrate.convert import convert
from trainer_infra.migrate.result import Options, Result
from trainer_infra.migrate.source import Document
from trainer_infra.migrate.target import Target, stack_target
from trainer_infra.stack.build import build_plan
from trainer_infra.stack.validate import validate

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "docker.io/example/train:1.0"


@cache
def _local() -> Target:
    validated = validate(stack_raw("local"))
    return stack_target("local", validated, build_plan(validated))


@cache
def local_target(trainer_version: str | None = None) -> Target:
    """The local stack (teams nlp and vision, queues `default`, priorities low/normal/high, the catalog),
    optionally as if it ran another Trainer version. Shared between tests: the converter never changes it."""
    target = _local()
    return dataclasses.replace(target, trainer_version=trainer_version) if trainer_version else target


def node_image(target: Target, runtime: str) -> str:
    jobs = target.runtimes[runtime]["spec"]["template"]["spec"]["replicatedJobs"]
    node = next(j for j in jobs if j["name"] == "node")
    return str(node["template"]["spec"]["template"]["spec"]["containers"][0]["image"])


def pod(container: str, **extra: Any) -> dict[str, Any]:
    return {"template": {"spec": {"containers": [{"name": container, "image": IMAGE, **extra}]}}}


def job(api_version: str, kind: str, target: Target | None = None, name: str = "train") -> dict[str, Any]:
    """A minimal v1 job of `kind` that converts cleanly on the local stack (TFJob/PaddleJob with --runtime)."""
    t = target or local_target()
    torchrun = {"command": ["torchrun", "train.py"]}
    specs: dict[str, Any] = {
        "PyTorchJob": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, **pod("pytorch", **torchrun)},
                "Worker": {"replicas": 1, **pod("pytorch", **torchrun)},
            }
        },
        "MPIJob": {
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, **pod("launcher", command=["deepspeed", "train.py"])},
                "Worker": {
                    "replicas": 2,
                    "template": {
                        "spec": {"containers": [{"name": "worker", "image": node_image(t, "deepspeed-distributed")}]}
                    },
                },
            }
        },
        "TFJob": {
            "tfReplicaSpecs": {
                "Chief": {"replicas": 1, **pod("tensorflow", **torchrun)},
                "Worker": {"replicas": 1, **pod("tensorflow", **torchrun)},
            }
        },
        "XGBoostJob": {
            "xgbReplicaSpecs": {
                "Master": {"replicas": 1, **pod("xgboost")},
                "Worker": {"replicas": 1, **pod("xgboost")},
            }
        },
        "JAXJob": {"jaxReplicaSpecs": {"Worker": {"replicas": 2, **pod("jax")}}},
        "PaddleJob": {
            "paddleReplicaSpecs": {
                "Master": {"replicas": 1, **pod("paddle", **torchrun)},
                "Worker": {"replicas": 1, **pod("paddle", **torchrun)},
            }
        },
    }
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": "nlp"},
        "spec": copy.deepcopy(specs[kind]),
    }


def options_for(kind: str, **extra: Any) -> Options:
    """TFJob and PaddleJob have no runtime in the catalog: they are converted onto torch-distributed; MPIJobs
    are pinned to deepspeed-distributed (the choice by command is tested on its own)."""
    runtime = {"TFJob": "torch-distributed", "PaddleJob": "torch-distributed", "MPIJob": "deepspeed-distributed"}.get(
        kind
    )
    return Options(runtime=extra.pop("runtime", runtime), **extra)


def run(obj: dict[str, Any], target: Target | None = None, options: Options | None = None) -> Result:
    return convert(Document("job.yaml", 0, obj), target or local_target(), options or options_for(obj["kind"]))
