"""Issue #27's member attacks as data: the unit tests evaluate them against the rendered policies, the e2e
suite (tests/e2e/test_deputies.py) sends them to the real API server. Each entry: what a member puts into a
TrainJob, and a word the refusal must contain."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

#: `initializer.dataset.env` of a TrainJob on the data cache runtime
ENV_ATTACKS: dict[str, tuple[list[Obj], str]] = {
    "unpinned image": ([{"name": "CACHE_IMAGE", "value": "docker.io/evil/miner:1"}], "initializer.dataset.env"),
    "cluster size": ([{"name": "CLUSTER_SIZE", "value": "64"}], "CLUSTER_SIZE"),
    "worker cpu": ([{"name": "WORKER_CPU", "value": "96"}], "WORKER_CPU"),
    "worker memory": ([{"name": "WORKER_MEM", "value": "1Ti"}], "WORKER_MEM"),
    "head memory": ([{"name": "HEAD_MEM", "value": "1Ti"}], "HEAD_MEM"),
    "cloud role": ([{"name": "IAM_ROLE", "value": "arn:aws:iam::1:role/admin"}], "IAM_ROLE"),
    "python path": ([{"name": "PYTHONPATH", "value": "/workspace/evil"}], "PYTHON"),
    "python startup": ([{"name": "PYTHONSTARTUP", "value": "/workspace/x.py"}], "PYTHON"),
    "preload": ([{"name": "LD_PRELOAD", "value": "/workspace/x.so"}], "LD_"),
    "storage override": ([{"name": "STORAGE_URI", "value": "s3://other-team/data"}], "STORAGE_URI"),
    "GPU in the initializer": ([{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}], "GPU selection"),
    "readiness": ([{"name": "READINESS_PERIOD_SECONDS", "value": "99999"}], "initializer.dataset.env"),
    "from a field": (
        [{"name": "PYTHONPATH", "valueFrom": {"fieldRef": {"fieldPath": "metadata.annotations['x']"}}}],
        "PYTHON",
    ),
}


#: a runtime patch of the `dataset-initializer` job (the cache initializer's)
PATCH_ATTACKS: dict[str, tuple[Obj, str]] = {
    "step label and a container": (
        {
            "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                "spec": {"template": {"spec": {"containers": [{"name": "node"}]}}},
            }
        },
        "trainer.kubeflow.org",
    ),
    "a container": ({"template": {"spec": {"template": {"spec": {"containers": [{"name": "node"}]}}}}}, "initializer"),
    "env into the initializer": (
        {
            "template": {
                "spec": {
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "dataset-initializer", "env": [{"name": "PYTHONPATH", "value": "/annot"}]}
                            ]
                        }
                    }
                }
            }
        },
        "initializer",
    ),
    "downward API of an annotation": (
        {
            "template": {
                "spec": {
                    "template": {
                        "metadata": {"annotations": {"code": "import os; os.system('id')"}},
                        "spec": {
                            "volumes": [
                                {
                                    "name": "code",
                                    "downwardAPI": {
                                        "items": [
                                            {
                                                "path": "sitecustomize.py",
                                                "fieldRef": {"fieldPath": "metadata.annotations['code']"},
                                            }
                                        ]
                                    },
                                }
                            ],
                            "containers": [
                                {
                                    "name": "dataset-initializer",
                                    "volumeMounts": [{"name": "code", "mountPath": "/usr/lib/python3/dist-packages"}],
                                }
                            ],
                        },
                    }
                }
            }
        },
        "initializer",
    ),
    "an init container": (
        {"template": {"spec": {"template": {"spec": {"initContainers": [{"name": "x"}]}}}}},
        "initializer",
    ),
    "the job's own account": (
        {"template": {"spec": {"template": {"spec": {"serviceAccountName": "default"}}}}},
        "initializer",
    ),
}


#: set in `spec.trainer.env` and in a runtime patch's container env
GPU_ENV = [
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "NVIDIA_MIG_CONFIG_DEVICES",
    "AMD_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
    "HABANA_VISIBLE_DEVICES",
]


#: a runtime patch of the trainer's pod spec
PSS_ATTACKS: dict[str, tuple[Obj, str]] = {
    "unconfined seccomp": ({"securityContext": {"seccompProfile": {"type": "Unconfined"}}}, "seccompProfile"),
    "unconfined seccomp in a container": (
        {"containers": [{"name": "node", "securityContext": {"seccompProfile": {"type": "Unconfined"}}}]},
        "seccompProfile",
    ),
    "unconfined AppArmor": ({"securityContext": {"appArmorProfile": {"type": "Unconfined"}}}, "appArmorProfile"),
    "spc_t": ({"securityContext": {"seLinuxOptions": {"type": "spc_t"}}}, "seLinuxOptions"),
    "SELinux user": (
        {"containers": [{"name": "node", "securityContext": {"seLinuxOptions": {"user": "system_u"}}}]},
        "seLinuxOptions",
    ),
    "unsafe sysctl": ({"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}}, "sysctls"),
    "unmasked proc": (
        {"containers": [{"name": "node", "securityContext": {"procMount": "Unmasked"}}]},
        "procMount",
    ),
    "windows host process": (
        {"securityContext": {"windowsOptions": {"hostProcess": True}}},
        "Windows host process",
    ),
}
