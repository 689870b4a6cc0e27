"""Names kwok defines (kubernetes-sigs/kwok)."""

from __future__ import annotations

from trainer_infra.core.upstream import kubernetes

#: kwok's controller image, without its tag.
IMAGE = f"{kubernetes.REGISTRY}/kwok/kwok"
#: The Go module kwok is built from (its stage manifests are read from it too).
GO_MODULE = "sigs.k8s.io/kwok"
#: The API group of kwok's own objects; Stages are written in its `v1alpha1`.
GROUP = "kwok.x-k8s.io"
STAGE_API = f"{GROUP}/v1alpha1"
#: The annotation (and taint key) that marks a node kwok manages.
NODE_ANNOTATION = f"{GROUP}/node"
#: The annotation selector of objects whose status kwok must leave alone.
STATUS_ANNOTATION = f"{GROUP}/status"
