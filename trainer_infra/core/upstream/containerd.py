"""Names containerd defines."""

from __future__ import annotations

#: The containerd namespace its CRI plugin keeps Kubernetes' containers and images in (`pkg/cri/constants`).
CRI_NAMESPACE = "k8s.io"
