"""Names Kueue defines that more than one area writes or checks."""

from __future__ import annotations

#: The job label naming the LocalQueue the job is submitted to (Kueue `constants.QueueLabel`).
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
#: The job label naming the WorkloadPriorityClass (Kueue `constants.WorkloadPriorityClassLabel`).
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
#: The controller name of MultiKueue admission checks and of jobs managed by the manager (`spec.managedBy`).
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"
#: Topology-aware scheduling: the pod-template annotations that place a PodSet in one domain of a level, by mode.
TOPOLOGY_ANNOTATIONS = {
    "required": "kueue.x-k8s.io/podset-required-topology",
    "preferred": "kueue.x-k8s.io/podset-preferred-topology",
    "unconstrained": "kueue.x-k8s.io/podset-unconstrained-topology",
}
