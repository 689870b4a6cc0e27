"""Names JobSet defines (kubernetes-sigs/jobset `api/jobset/v1alpha2`)."""

from __future__ import annotations

#: The API group of JobSets (version: the matrix's `apiVersions`).
GROUP = "jobset.x-k8s.io"
#: JobSet labels each of its pods with the JobSet's name, which is the TrainJob's.
#: The prefix of the labels and annotations JobSet owns.
LABEL_PREFIX = "jobset.sigs.k8s.io/"
JOBSET_NAME_LABEL = f"{LABEL_PREFIX}jobset-name"
