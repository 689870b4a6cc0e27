"""`trainer-infra migrate`: Kubeflow Training Operator v1 jobs → TrainJobs for a stack's catalog.

Pure modules over plain dicts: `source` reads manifests, `convert` maps one v1 job using the field table
of `mapping` (every v1 field is mapped, superseded or reported), `tenancy` refuses what a team member
could not submit, `validate` checks the result, `inventory` reads a live cluster, `report` prints.
"""
