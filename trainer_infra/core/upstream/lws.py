"""Names LeaderWorkerSet defines (kubernetes-sigs/lws `api/leaderworkerset/v1`)."""

from __future__ import annotations

#: The Go module the manager is built from, and the variable its Makefile stamps the release into (`-X`).
GO_MODULE = "sigs.k8s.io/lws"
VERSION_VARIABLE = f"{GO_MODULE}/pkg/version.GitVersion"
#: The API group of LeaderWorkerSets, and the version the objects are written in (LWS comes with Trainer's chart,
#: so the matrix names no version for it).
GROUP = "leaderworkerset.x-k8s.io"
API = f"{GROUP}/v1"
#: The manager's Configuration (`api/config/v1alpha1`).
CONFIG_API = "config.lws.x-k8s.io/v1alpha1"
#: LeaderWorkerSet labels each of its pods with the set's name.
#: The prefix of the labels and annotations LeaderWorkerSet owns.
LABEL_PREFIX = "leaderworkerset.sigs.k8s.io/"
NAME_LABEL = f"{LABEL_PREFIX}name"
