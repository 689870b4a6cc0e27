"""Names Kueue defines that more than one area writes or checks."""

from __future__ import annotations

#: The job label naming the LocalQueue the job is submitted to (Kueue `constants.QueueLabel`).
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
