"""The per-pod PID limit every node of a pool carries (the kubelet's `podPidsLimit`, flag `--pod-max-pids`): one
team's fork bomb stops at its own pod instead of exhausting the node's PID table and taking every pod on the node
down with it (https://kubernetes.io/docs/concepts/policy/pid-limiting/).

The figures:
- Linux counts threads, not only processes, against a cgroup's `pids.max` (kernel Documentation/admin-guide/
  cgroup-v2.rst, "PID": "PIDs used in this controller refer to TIDs"). A training pod's tasks: per rank the main
  process (CUDA's few runtime threads, NCCL's proxy and watchdog threads, PyTorch's inter-op pool, the pin-memory
  thread), torchrun's launcher, and `num_workers` DataLoader worker processes per rank, each one thread after PyTorch
  sets `torch.set_num_threads(1)` in it (torch/utils/data/_utils/worker.py); torchrun sets `OMP_NUM_THREADS=1` per
  rank. An 8-GPU pod with 16 workers per rank is some 8 x (16 + ~50) ~= 550 tasks; a rank that keeps one OpenMP thread
  per core on a 192-vCPU node adds ~1500 more.
- DEFAULT (4096) leaves that worst case twice over; it is also OpenShift's (4.11+) and Podman 4.3's default per
  container (docs.podman.io v4.3, `--pids-limit`). The smallest node `pid_max` is 32768 (the kernel's default floor;
  systemd 243+ raises it to 4194304 on 64-bit), so one pod's fork bomb takes at most an eighth of the smallest table,
  and the kubelet, sshd and the runtime keep theirs.
- FLOOR (1024): GKE refuses a smaller `podPidsLimit` (node pool kubeletConfig: "must be greater than or equal to 1024
  and less than 4194304", pulumi_gcp 10.2.0 `NodePoolNodeConfigKubeletConfig.pod_pids_limit`), and below it the
  8-rank pod above cannot start its workers. CEILING: the kernel's PID_MAX_LIMIT (2^22) less one, GKE's bound too.

Where each node gets it: docs/node-pools-and-queues.md ("PID limit per pod").
"""

from __future__ import annotations

DEFAULT = 4096
FLOOR = 1024
CEILING = 4194303
#: the KubeletConfiguration field and the kubelet flag that set it (kubelet v1beta1 `PodPidsLimit`)
KUBELET_KEY = "podPidsLimit"
KUBELET_FLAG = "--pod-max-pids"
#: Bottlerocket's name for it (settings.kubernetes.pod-pids-limit, Bottlerocket settings reference; Karpenter's
#: BottlerocketConfig has the same key, karpenter-provider-aws v1.15.2 pkg/providers/amifamily/bootstrap)
BOTTLEROCKET_KEY = "pod-pids-limit"
#: nodeadm's NodeConfig (AL2023): https://awslabs.github.io/amazon-eks-ami/nodeadm/doc/api/
NODEADM_API = "node.eks.aws/v1alpha1"
NODEADM_CONTENT_TYPE = "application/node.eks.aws"
MIME_BOUNDARY = "TRAINERPLATFORM"


def checked(value: int) -> int:
    """`podPidsLimit` within what a training pod needs and what the kernel allows."""
    if value < FLOOR:
        raise ValueError(
            f"expected at least {FLOOR} PIDs per pod (threads count too: an 8-GPU PyTorch pod with DataLoader "
            f"workers needs several hundred; GKE refuses less); hint: leave it out for the default {DEFAULT}"
        )
    if value > CEILING:
        raise ValueError(f"expected at most {CEILING} (the kernel's PID_MAX_LIMIT less one); hint: {DEFAULT}")
    return value


def nodeadm_user_data(limit: int) -> str:
    """An AL2023 user data that sets the limit: a MIME multi-part document with one nodeadm NodeConfig, which EKS
    (managed node groups without a custom AMI) and Karpenter merge with the NodeConfig they add themselves."""
    return "\n".join(
        [
            "MIME-Version: 1.0",
            f'Content-Type: multipart/mixed; boundary="{MIME_BOUNDARY}"',
            "",
            f"--{MIME_BOUNDARY}",
            f"Content-Type: {NODEADM_CONTENT_TYPE}",
            "",
            "---",
            f"apiVersion: {NODEADM_API}",
            "kind: NodeConfig",
            "spec:",
            "  kubelet:",
            "    config:",
            f"      {KUBELET_KEY}: {limit}",
            "",
            f"--{MIME_BOUNDARY}--",
            "",
        ]
    )


def bottlerocket_user_data(limit: int) -> str:
    """A Bottlerocket user data (TOML) that sets the limit; EKS and Karpenter merge their settings into it."""
    return f"[settings.kubernetes]\n{BOTTLEROCKET_KEY} = {limit}\n"


def unmanaged_warning(at: str, limit: int) -> str:
    """What to set on nodes the platform does not configure (their kubelet is someone else's)."""
    return (
        f"{at}.podPidsLimit: the platform does not configure these nodes' kubelet; set "
        f"{KUBELET_KEY}: {limit} in their KubeletConfiguration (or {KUBELET_FLAG}={limit}), else a fork bomb in one "
        "pod can exhaust the node's PIDs"
    )
