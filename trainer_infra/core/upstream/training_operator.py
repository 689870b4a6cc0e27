"""Names Kubeflow's v1 job operators define (kubeflow/training-operator v1.9, kubeflow/mpi-operator v2).

These are the jobs `migrate` reads; the platform never installs the operators.
"""

from __future__ import annotations

#: The API group of PyTorchJob, TFJob, … (`kubeflow.org/v1`) and of the MPI Operator's MPIJob.
GROUP = "kubeflow.org"
#: The MPI Operator's MPIJob version.
MPIJOB_API = f"{GROUP}/v2beta1"
#: The operators' own controller names, as a job's `spec.runPolicy.managedBy` names them.
CONTROLLER_NAMES = (f"{GROUP}/training-operator", f"{GROUP}/mpi-operator")
