"""Names kwok defines (kubernetes-sigs/kwok)."""

from __future__ import annotations

from trainer_infra.core.upstream import kubernetes

#: kwok's controller image, without its tag.
IMAGE = f"{kubernetes.REGISTRY}/kwok/kwok"
#: The annotation (and taint key) that marks a node kwok manages.
NODE_ANNOTATION = "kwok.x-k8s.io/node"
#: The annotation selector of objects whose status kwok must leave alone.
STATUS_ANNOTATION = "kwok.x-k8s.io/status"
