"""The harness's REST client: trainer_infra/sandbox/kube.py (the package's control plane uses it too)."""

from trainer_infra.sandbox.kube import ApiError, FatalWaitError, KubeClient, ResourceInfo, split_api_version, wait_for

__all__ = ["ApiError", "FatalWaitError", "KubeClient", "ResourceInfo", "split_api_version", "wait_for"]
