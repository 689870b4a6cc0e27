"""Names Kueue defines (kubernetes-sigs/kueue `pkg/constants`, `apis/`, `pkg/controller/jobframework`)."""

from __future__ import annotations

from trainer_infra.core.upstream import jobset, lws, trainer

#: The Go module the manager is built from, and the variable its Makefile stamps the release into (`-X`).
GO_MODULE = "sigs.k8s.io/kueue"
VERSION_VARIABLE = f"{GO_MODULE}/pkg/version.GitVersion"
#: The API group of Kueue's objects (version: the matrix's `apiVersions`).
GROUP = "kueue.x-k8s.io"
#: The group of Kueue's manager Configuration.
CONFIG_GROUP = f"config.{GROUP}"
#: The visibility API (pending workloads of a LocalQueue).
VISIBILITY_GROUP = f"visibility.{GROUP}"
#: The job label naming the LocalQueue the job is submitted to (Kueue `constants.QueueLabel`).
QUEUE_LABEL = f"{GROUP}/queue-name"
#: The job label naming the WorkloadPriorityClass (Kueue `constants.WorkloadPriorityClassLabel`).
PRIORITY_LABEL = f"{GROUP}/priority-class"
#: The controller name of MultiKueue admission checks and of jobs managed by the manager (`spec.managedBy`).
MULTIKUEUE_CONTROLLER = f"{GROUP}/multikueue"
#: Topology-aware scheduling: the pod-template annotations that place a PodSet in one domain of a level, by mode.
TOPOLOGY_ANNOTATIONS = {
    "required": f"{GROUP}/podset-required-topology",
    "preferred": f"{GROUP}/podset-preferred-topology",
    "unconstrained": f"{GROUP}/podset-unconstrained-topology",
}
#: The field manager of the runtime patch Kueue writes when it admits a TrainJob (pkg/controller/jobs/trainjob:
#: `runtimePatchManagerName`).
PATCH_MANAGER = f"{GROUP}/manager"
#: The leader-election lease of the manager (Kueue's default `leaderElection.resourceName`).
LEADER_ELECTION_ID = f"c1f6bfd2.{GROUP}"
#: The Workload kind as `groupKindConcurrency` keys it.
WORKLOAD_GROUP_KIND = f"Workload.{GROUP}"
#: Integration framework names (`integrations.frameworks` of Kueue's Configuration; chart values.yaml).
TRAINJOB_FRAMEWORK = f"{trainer.GROUP}/trainjob"
BATCH_JOB_FRAMEWORK = "batch/job"
JOBSET_FRAMEWORK = f"{jobset.GROUP}/jobset"
LEADERWORKERSET_FRAMEWORK = f"{lws.GROUP}/leaderworkerset"
#: The controller of Kueue's ProvisioningRequest admission checks (pkg/controller/admissionchecks/provisioning).
PROVISIONING_CONTROLLER = f"{GROUP}/provisioning-request"
#: Feature gates that require TopologyAwareScheduling and are on by default (Kueue 0.19.2
#: pkg/config/validation.go LoadAndValidateFeatureGates, pkg/features/kube_features.go): with TAS off and any of
#: them on, the manager exits ("conflicting feature gates detected"). All of them are gates of 0.18.3 too.
TAS_DEPENDENT_GATES = (
    "TASBalancedPlacement",
    "TASFailedNodeReplacement",
    "TASFailedNodeReplacementFailFast",
    "TASHandleOverlappingFlavors",
    "TASMultiLayerTopology",
    "TASProfileMixed",
    "TASRecomputeAssignmentWithinSchedulingCycle",
    "TASReplaceNodeOnNodeTaints",
    "TASReplaceNodeOnPodTermination",
)
