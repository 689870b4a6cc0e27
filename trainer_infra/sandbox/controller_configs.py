"""The controllers' configuration files as the sandbox runs them: every server on loopback, no leader election,
certificates from the sandbox's CA instead of the controllers' own cert management.

Pure data (the control plane writes and starts them): the one place that says how a sandbox controller differs
from its chart's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainer_infra.core.upstream.kueue import BATCH_JOB_FRAMEWORK, JOBSET_FRAMEWORK, TRAINJOB_FRAMEWORK
from trainer_infra.core.upstream.trainer import CONFIG_API as TRAINER_CONFIG_API
from trainer_infra.nodepools.kwok import KWOK_MANAGED_NODES

Obj = dict[str, Any]

#: Kueue frameworks the platform uses; the others stay off so their webhooks are no-ops.
KUEUE_FRAMEWORKS = (BATCH_JOB_FRAMEWORK, JOBSET_FRAMEWORK, TRAINJOB_FRAMEWORK)


def manager_config(api_version: str, webhook_port: int, health_port: int, cert_dir: Path, metrics: str = "0") -> Obj:
    """A controller-runtime manager's Configuration (JobSet, LeaderWorkerSet): webhook and health on 127.0.0.1,
    the serving certificate in ``cert_dir``, metrics at ``metrics`` ("0": off)."""
    return {
        "apiVersion": api_version,
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)},
        "metrics": {"bindAddress": metrics},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
    }


def kueue_config(
    api_version: str, webhook_port: int, health_port: int, metrics_port: int, cert_dir: Path, settings: Obj
) -> Obj:
    """Kueue's Configuration: the stack's scheduling ``settings`` (``render.kueue_settings``) laid over the
    sandbox's servers; its metric settings (enableClusterQueueResources) kept and served on loopback."""
    return {
        "apiVersion": api_version,
        "kind": "Configuration",
        "namespace": "kueue-system",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "integrations": {"frameworks": list(KUEUE_FRAMEWORKS)},
        **settings,
        "metrics": {**settings.get("metrics", {}), "bindAddress": f"127.0.0.1:{metrics_port}"},
        # VisibilityOnDemand serves from a fixed /visibility cert dir: off in the sandbox.
        "featureGates": {**settings.get("featureGates", {}), "VisibilityOnDemand": False},
    }


def trainer_config(webhook_port: int, health_port: int, metrics_port: int) -> Obj:
    """Trainer's Configuration: its metrics over TLS only, as in its chart (it reads its webhook certificate from
    ``$TMPDIR/k8s-webhook-server/serving-certs``, not from a config field)."""
    return {
        "apiVersion": TRAINER_CONFIG_API,
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "certManagement": {"enable": False},
        "webhook": {"port": webhook_port, "host": "127.0.0.1"},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}", "secureServing": True},
        "health": {
            "healthProbeBindAddress": f"127.0.0.1:{health_port}",
            "readinessEndpointName": "readyz",
            "livenessEndpointName": "healthz",
        },
    }


def controller_manager_flags(
    kubeconfig: Path, sa_key: Path, ca_cert: Path, service_cidr: str, workdir: Path
) -> list[str]:
    """kube-controller-manager on loopback, without the cloud's controllers and node IPAM (kwok and the real node
    bring their own pod ranges)."""
    return [
        *_loopback_component(kubeconfig),
        "--secure-port=0",
        f"--service-account-private-key-file={sa_key}",
        f"--root-ca-file={ca_cert}",
        f"--service-cluster-ip-range={service_cidr}",
        "--controllers=*,-nodeipam,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller",
        # its default, /usr/libexec/kubernetes/…, would be created on the host at every start
        f"--flex-volume-plugin-dir={workdir / 'flexvolume'}",
        "--v=1",
    ]


def _loopback_component(kubeconfig: Path) -> list[str]:
    """A core component as the sandbox runs it: the admin kubeconfig for everything, alone, on loopback."""
    return [
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
    ]


def scheduler_flags(kubeconfig: Path, port: int) -> list[str]:
    return [
        *_loopback_component(kubeconfig),
        f"--secure-port={port}",
        "--v=1",
    ]


def kwok_flags(kubeconfig: Path, config: Path, pod_cidr: str, port: int) -> list[str]:
    """kwok managing only the nodes annotated as fake (the real node is the kubelet's)."""
    return [
        f"--kubeconfig={kubeconfig}",
        f"--config={config}",
        *KWOK_MANAGED_NODES,
        f"--cidr={pod_cidr}",
        "--node-ip=10.250.0.1",
        "--node-lease-duration-seconds=40",
        f"--server-address=127.0.0.1:{port}",
    ]
