"""Stand-in platform objects for the scenarios while the stack's render lacks them.

The foundation's ``trainer-infra render --stack local`` is the source of truth. Until the
catalog, node-pool/queue and tenancy issues land, it renders no runtimes, queues, teams or
kwok nodes; the scenarios then use these objects instead, and say so in the pytest header.
They follow DESIGN.md §3 (v1beta2 Kueue, Trainer v2.2 API) and the kwok node conventions.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

TEAMS = ("team-a", "team-b")
GPU_POOL = "gpu-a100"
CPU_POOL = "cpu"
POOL_LABEL = "trainer-platform.io/node-pool"
BLOCK_LABEL = "trainer-platform.io/block"
GPU = "nvidia.com/gpu"
GPU_TAINT = {"key": GPU, "value": "present", "effect": "NoSchedule"}
#: Prefixed so they never overwrite the catalog's runtimes of the same upstream name.
TORCH_RUNTIME = "standin-torch-distributed"
DEEPSPEED_RUNTIME = "standin-deepspeed-distributed"
TORCHTUNE_RUNTIME = "standin-torchtune-llama3.2-1b"


def _node(name: str, pool: str, block: str, gpus: int) -> Obj:
    cap = {"cpu": "32", "memory": "256Gi", "pods": "110"}
    if gpus:
        cap[GPU] = str(gpus)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
                POOL_LABEL: pool,
                BLOCK_LABEL: block,
            },
        },
        "spec": {"taints": [GPU_TAINT] if gpus else []},
        "status": {"capacity": cap, "allocatable": cap},
    }


def nodes() -> list[Obj]:
    """4 GPU nodes (8 GPUs each) in 2 topology blocks, 2 CPU nodes."""
    gpu = [_node(f"gpu-{i}", GPU_POOL, f"block-{i // 2}", 8) for i in range(4)]
    cpu = [_node(f"cpu-{i}", CPU_POOL, "block-cpu", 0) for i in range(2)]
    return [*gpu, *cpu]


def _cq(team: str, gpu_quota: int, borrowing_limit: int | None) -> Obj:
    gpu_res: Obj = {"name": GPU, "nominalQuota": str(gpu_quota)}
    if borrowing_limit is not None:
        gpu_res["borrowingLimit"] = str(borrowing_limit)
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": team},
        "spec": {
            "cohortName": "org",
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": team}},
            "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", GPU],
                    "flavors": [
                        {
                            "name": GPU_POOL,
                            "resources": [
                                {"name": "cpu", "nominalQuota": "128"},
                                {"name": "memory", "nominalQuota": "1Ti"},
                                gpu_res,
                            ],
                        }
                    ],
                },
            ],
        },
    }


def _torch_runtime() -> Obj:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": TORCH_RUNTIME, "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                                "spec": {
                                    "template": {
                                        "metadata": {
                                            "annotations": {"kueue.x-k8s.io/podset-required-topology": BLOCK_LABEL}
                                        },
                                        "spec": {
                                            "containers": [
                                                {
                                                    "name": "node",
                                                    "image": "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime",
                                                    "command": ["/bin/bash", "-c", "echo 'Torch Distributed Runtime'"],
                                                }
                                            ]
                                        },
                                    }
                                },
                            },
                        }
                    ]
                }
            },
        },
    }


def objects() -> list[Obj]:
    """Everything the scenarios need, as the platform would render it."""
    namespaces = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": t}} for t in TEAMS]
    kueue: list[Obj] = [
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Topology",
            "metadata": {"name": "default"},
            "spec": {"levels": [{"nodeLabel": BLOCK_LABEL}, {"nodeLabel": "kubernetes.io/hostname"}]},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": GPU_POOL},
            "spec": {
                "nodeLabels": {POOL_LABEL: GPU_POOL},
                "topologyName": "default",
                "tolerations": [{"key": GPU, "operator": "Equal", "value": "present", "effect": "NoSchedule"}],
            },
        },
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Cohort", "metadata": {"name": "org"}, "spec": {}},
        # team-a owns 16 GPUs; team-b owns 8 and may not borrow (the quota scenario turns borrowing on).
        _cq("team-a", 16, None),
        _cq("team-b", 8, 0),
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "high"},
            "value": 1000,
            "description": "production training",
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "low"},
            "value": 100,
            "description": "experiments",
        },
        *(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "LocalQueue",
                "metadata": {"name": t, "namespace": t},
                "spec": {"clusterQueue": t},
            }
            for t in TEAMS
        ),
    ]
    rbac: list[Obj] = [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "trainer-platform:data-scientist"},
            "rules": [
                {
                    "apiGroups": ["trainer.kubeflow.org"],
                    "resources": ["trainjobs"],
                    "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
                },
                {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainingruntimes"], "verbs": ["get", "list"]},
                {"apiGroups": [""], "resources": ["pods", "pods/log", "events"], "verbs": ["get", "list", "watch"]},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "trainer-platform:runtime-reader"},
            "rules": [
                {
                    "apiGroups": ["trainer.kubeflow.org"],
                    "resources": ["clustertrainingruntimes"],
                    "verbs": ["get", "list", "watch"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "trainer-platform:runtime-reader"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "trainer-platform:runtime-reader",
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": t} for t in TEAMS],
        },
        *(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "data-scientists", "namespace": t},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "trainer-platform:data-scientist",
                },
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": t}],
            }
            for t in TEAMS
        ),
    ]
    return [*namespaces, *nodes(), *kueue, *rbac, _torch_runtime()]


#: kwok completes pods with this label (see sandbox.kwok_pod_stages): initializers finish, trainers run on.
COMPLETE = {"e2e.trainer-platform/complete": "true"}


def deepspeed_runtime() -> Obj:
    """Upstream's deepspeed-distributed shape (MPI: launcher + node jobs)."""
    image = "ghcr.io/kubeflow/trainer/deepspeed-runtime"
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": DEEPSPEED_RUNTIME, "labels": {"trainer.kubeflow.org/framework": "deepspeed"}},
        "spec": {
            "mlPolicy": {
                "numNodes": 1,
                "mpi": {
                    "numProcPerNode": 1,
                    "mpiImplementation": "OpenMPI",
                    "sshAuthMountPath": "/home/mpiuser/.ssh",
                    "runLauncherAsNode": True,
                },
            },
            "template": {
                "spec": {
                    "network": {"publishNotReadyAddresses": True},
                    "successPolicy": {"operator": "All", "targetReplicatedJobs": ["launcher"]},
                    "replicatedJobs": [
                        {
                            "name": "launcher",
                            "template": {
                                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                                "spec": {
                                    "template": {
                                        "spec": {
                                            "containers": [
                                                {"name": "node", "image": image, "securityContext": {"runAsUser": 1000}}
                                            ]
                                        }
                                    }
                                },
                            },
                        },
                        {
                            "name": "node",
                            "template": {
                                "spec": {
                                    "template": {
                                        "spec": {
                                            "containers": [
                                                {
                                                    "name": "node",
                                                    "image": image,
                                                    "securityContext": {"runAsUser": 1000},
                                                    "command": ["/usr/sbin/sshd"],
                                                    "args": ["-De", "-f", "/home/mpiuser/.sshd_config"],
                                                }
                                            ]
                                        }
                                    }
                                }
                            },
                        },
                    ],
                }
            },
        },
    }


def torchtune_runtime() -> Obj:
    """Upstream's torchtune-llama3.2-1b shape, with an emptyDir instead of the PVC template.

    The sandbox has no volume provisioner: a PVC from ``volumeClaimPolicies`` would stay Pending
    and keep the pods unschedulable. Initializer pods are labelled to complete in kwok.
    """
    mount = [{"name": "initializer", "mountPath": "/workspace"}]
    volumes = [{"name": "initializer", "emptyDir": {}}]

    def init_job(step: str, uri: str) -> Obj:
        return {
            "name": step,
            "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": step}},
                "spec": {
                    "template": {
                        "metadata": {"labels": dict(COMPLETE)},
                        "spec": {
                            "volumes": volumes,
                            "containers": [
                                {
                                    "name": step,
                                    "image": f"ghcr.io/kubeflow/trainer/{step}",
                                    "env": [{"name": "STORAGE_URI", "value": uri}],
                                    "volumeMounts": mount,
                                    # Upstream sets no requests here; Kueue then assigns no flavor and a
                                    # TAS-only ClusterQueue never admits ("no TAS flavor assigned").
                                    "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
                                }
                            ],
                        },
                    }
                },
            },
        }

    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": TORCHTUNE_RUNTIME, "labels": {"trainer.kubeflow.org/framework": "torchtune"}},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        init_job("dataset-initializer", "hf://tatsu-lab/alpaca"),
                        init_job("model-initializer", "hf://meta-llama/Llama-3.2-1B-Instruct"),
                        {
                            "name": "node",
                            "dependsOn": [
                                {"name": "dataset-initializer", "status": "Complete"},
                                {"name": "model-initializer", "status": "Complete"},
                            ],
                            "template": {
                                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                                "spec": {
                                    "template": {
                                        "spec": {
                                            "volumes": volumes,
                                            "containers": [
                                                {
                                                    "name": "node",
                                                    "image": "ghcr.io/kubeflow/trainer/torchtune-trainer",
                                                    "command": [
                                                        "tune",
                                                        "run",
                                                        "full_finetune_distributed",
                                                        "--config",
                                                        "llama3_2/1B_full",
                                                    ],
                                                    "resources": {"limits": {GPU: "2"}},
                                                    "volumeMounts": mount,
                                                }
                                            ],
                                        }
                                    }
                                },
                            },
                        },
                    ]
                }
            },
        },
    }
