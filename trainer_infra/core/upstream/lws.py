"""Names LeaderWorkerSet defines (kubernetes-sigs/lws `api/leaderworkerset/v1`)."""

from __future__ import annotations

#: The API group of LeaderWorkerSets.
GROUP = "leaderworkerset.x-k8s.io"
#: LeaderWorkerSet labels each of its pods with the set's name.
#: The prefix of the labels and annotations LeaderWorkerSet owns.
LABEL_PREFIX = "leaderworkerset.sigs.k8s.io/"
NAME_LABEL = f"{LABEL_PREFIX}name"
