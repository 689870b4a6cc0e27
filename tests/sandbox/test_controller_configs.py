"""The sandbox runs Kueue with the stack's scheduling settings, but its own servers: a stack's metrics and feature
gates reach it, and nothing of the stack's can move a server off loopback or turn on what the sandbox cannot serve."""

from __future__ import annotations

from pathlib import Path

from trainer_infra.sandbox.controller_configs import KUEUE_FRAMEWORKS, kueue_config


def test_the_stacks_kueue_settings_reach_the_sandbox_on_its_own_servers() -> None:
    settings = {
        "waitForPodsReady": {"enable": True, "timeout": "3m"},
        "metrics": {"enableClusterQueueResources": True, "bindAddress": ":8443"},
        "featureGates": {"TopologyAwareScheduling": False, "VisibilityOnDemand": True},
    }
    config = kueue_config("config.kueue.x-k8s.io/v1beta2", 1, 2, 3, Path("/certs"), settings)
    assert config["waitForPodsReady"] == settings["waitForPodsReady"]
    assert config["metrics"] == {"enableClusterQueueResources": True, "bindAddress": "127.0.0.1:3"}
    # the stack's gate kept; the visibility server (a fixed certificate folder) stays off here
    assert config["featureGates"] == {"TopologyAwareScheduling": False, "VisibilityOnDemand": False}
    assert config["webhook"] == {"port": 1, "host": "127.0.0.1", "certDir": "/certs"}
    assert config["integrations"] == {"frameworks": list(KUEUE_FRAMEWORKS)}
