"""What differs between the v1 job kinds: where their replica specs live, which replica types exist and
what each becomes in a TrainJob, the framework's default container, port and restart policy.

Sources: kubeflow/training-operator v1.9.4 `pkg/apis/kubeflow.org/v1/*_types.go` (replica types,
`*DefaultContainerName`, `*DefaultPortName`/`*DefaultPort`, `*DefaultRestartPolicy` in `*_defaults.go`)
and kubeflow/mpi-operator v0.8.2 `pkg/apis/kubeflow/v2beta1/types.go`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from trainer_infra.core.upstream.training_operator import GROUP


class Role(Enum):
    """What a v1 replica type becomes.

    TRAINER: the pods that run the training command (trainer.* fields, the trainer job's patches).
    SAME: more pods of the TRAINER's kind (counted in numNodes; their template must equal the trainer's).
    NODES: MPI workers: the runtime's `node` job (resources, pod patches; the runtime runs sshd there).
    NONE: v2 has no place for these pods (TFJob parameter servers, evaluators): reported.
    """

    TRAINER = "trainer"
    SAME = "same"
    NODES = "nodes"
    NONE = "none"


@dataclass(frozen=True)
class Kind:
    kind: str
    api_version: str
    replicas_field: str
    # replica type → role, in the order the types are read
    roles: tuple[tuple[str, Role], ...]
    container: str | None  # the framework's default container name (v1 picks the training container by it)
    framework: str  # the `trainer.kubeflow.org/framework` label of the runtime that replaces it
    port: tuple[str, int] | None  # the framework's default port (name, number): superseded by the runtime
    restart_policy: str  # the v1 default restart policy

    def role(self, replica_type: str) -> Role | None:
        return dict(self.roles).get(replica_type)

    @property
    def label(self) -> str:
        return f"{self.api_version} {self.kind}"


KINDS: tuple[Kind, ...] = (
    Kind(
        "PyTorchJob",
        f"{GROUP}/v1",
        "pytorchReplicaSpecs",
        (("Master", Role.TRAINER), ("Worker", Role.SAME)),
        "pytorch",
        "torch",
        ("pytorchjob-port", 23456),
        "OnFailure",
    ),
    *(
        Kind(
            "MPIJob",
            f"{GROUP}/{version}",
            "mpiReplicaSpecs",
            (("Launcher", Role.TRAINER), ("Worker", Role.NODES)),
            None,
            "mpi",
            None,
            "Never",
        )
        for version in ("v1", "v2beta1")  # the training-operator's MPIJob and the mpi-operator's: one shape
    ),
    Kind(
        "TFJob",
        f"{GROUP}/v1",
        "tfReplicaSpecs",
        (
            ("Chief", Role.TRAINER),
            ("Master", Role.TRAINER),
            ("Worker", Role.SAME),
            ("PS", Role.NONE),
            ("Evaluator", Role.NONE),
        ),
        "tensorflow",
        "tensorflow",
        ("tfjob-port", 2222),
        "Never",
    ),
    Kind(
        "XGBoostJob",
        f"{GROUP}/v1",
        "xgbReplicaSpecs",
        (("Master", Role.TRAINER), ("Worker", Role.SAME)),
        "xgboost",
        "xgboost",
        ("xgboostjob-port", 9999),
        "Never",
    ),
    Kind(
        "JAXJob",
        f"{GROUP}/v1",
        "jaxReplicaSpecs",
        (("Worker", Role.TRAINER),),
        "jax",
        "jax",
        ("jaxjob-port", 6666),
        "Never",
    ),
    Kind(
        "PaddleJob",
        f"{GROUP}/v1",
        "paddleReplicaSpecs",
        (("Master", Role.TRAINER), ("Worker", Role.SAME)),
        "paddle",
        "paddle",
        ("master", 36543),
        "Never",
    ),
)
REPLICA_FIELDS = frozenset(k.replicas_field for k in KINDS)


def find_kind(api_version: str, kind: str) -> Kind | None:
    for k in KINDS:
        if k.api_version == api_version and k.kind == kind:
            return k
    return None


def known_kinds() -> list[str]:
    return [k.label for k in KINDS]
