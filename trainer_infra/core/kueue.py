"""Names Kueue defines that more than one area writes or checks."""

from __future__ import annotations

#: The job label naming the LocalQueue the job is submitted to (Kueue `constants.QueueLabel`).
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
#: The job label naming the WorkloadPriorityClass (Kueue `constants.WorkloadPriorityClassLabel`).
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
#: The controller name of MultiKueue admission checks and of jobs managed by the manager (`spec.managedBy`).
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
