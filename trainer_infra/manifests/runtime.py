"""The smallest valid ClusterTrainingRuntime: one torch `node` job. The readiness gate's webhook probe
and the end-to-end tests build theirs from it, so all agree with the Trainer webhook's rules."""

from __future__ import annotations

from typing import Any

from trainer_infra.manifests import meta

ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"


def minimal_runtime(
    name: str, container: dict[str, Any], replicas: int = 1, pod: dict[str, Any] | None = None
) -> dict[str, Any]:
    """`container` is the `node` container (its name is set here); `pod` adds pod-spec fields."""
    spec = {**(pod or {}), "containers": [{**container, "name": "node"}]}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": meta.metadata(name, labels={"trainer.kubeflow.org/framework": "torch"}),
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "replicas": replicas,
                            "template": {
                                "metadata": {"labels": {ANCESTOR: "trainer"}},
                                "spec": {"template": {"spec": spec}},
                            },
                        }
                    ]
                }
            },
        },
    }
