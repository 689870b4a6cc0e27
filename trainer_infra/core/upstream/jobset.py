"""Names JobSet defines (kubernetes-sigs/jobset `api/jobset/v1alpha2`)."""

from __future__ import annotations

#: The Go module the manager is built from, and the variable its Makefile stamps the release into (`-X`).
GO_MODULE = "sigs.k8s.io/jobset"
VERSION_VARIABLE = f"{GO_MODULE}/pkg/version.GitVersion"
#: The API group of JobSets (version: the matrix's `apiVersions`).
GROUP = "jobset.x-k8s.io"
#: The manager's Configuration (`api/config/v1alpha1`).
CONFIG_GROUP = f"config.{GROUP}"
CONFIG_API = f"{CONFIG_GROUP}/v1alpha1"
#: JobSet labels each of its pods with the JobSet's name, which is the TrainJob's.
#: The prefix of the labels and annotations JobSet owns.
LABEL_PREFIX = "jobset.sigs.k8s.io/"
JOBSET_NAME_LABEL = f"{LABEL_PREFIX}jobset-name"
#: JobSet labels each of its pods with the name of its replicatedJob.
REPLICATED_JOB_NAME_LABEL = f"{LABEL_PREFIX}replicatedjob-name"
