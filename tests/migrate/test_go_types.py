"""The CRD schemas the field-table tests walk are generated from the Go API types; this checks that every
JSON field of the v1 job types (Training Operator v1.9.4 `pkg/apis/kubeflow.org/v1/*_types.go`, MPI Operator
v2beta1 `types.go`) is among the fields those tests enumerate, so a field the generator dropped would show."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.migrate.schema_paths import fields
from tests.migrate.upstream import MPI_OPERATOR, TRAINING_OPERATOR, go_module, schemas
from trainer_infra.migrate.kinds import REPLICA_FIELDS

STRUCT = re.compile(r"^type (\w+) struct \{(.*?)^\}", re.S | re.M)
FIELD = re.compile(r'json:"([A-Za-z]\w*)')
# Observed state and list types: not part of a job's spec.
SKIP = re.compile(r"Status$|Condition$|List$")


def go_fields(files: list[Path]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for path in files:
        for name, body in STRUCT.findall(path.read_text()):
            if not SKIP.search(name):
                out[name] = set(FIELD.findall(body))
    return out


def test_every_go_field_is_enumerated() -> None:
    v1 = go_module("github.com/kubeflow/training-operator", f"v{TRAINING_OPERATOR}")
    mpi = go_module(*MPI_OPERATOR)
    if v1 is None or mpi is None:
        pytest.skip("no Go toolchain to download the upstream API modules")
    files = sorted((v1 / "pkg" / "apis" / "kubeflow.org" / "v1").glob("*_types.go"))
    files.append(mpi / "pkg" / "apis" / "kubeflow" / "v2beta1" / "types.go")
    structs = go_fields(files)
    assert {"PyTorchJobSpec", "MPIJobSpec", "RunPolicy", "SchedulingPolicy", "ElasticPolicy", "ReplicaSpec"} <= set(
        structs
    )
    enumerated = {p.rsplit(".", 1)[-1].removesuffix("[]") for s in schemas().values() for p, _ in fields(s)}
    enumerated |= REPLICA_FIELDS  # enumerated as `{replicas}`
    missing = {name: sorted(f - enumerated) for name, f in structs.items() if f - enumerated}
    assert missing == {}
