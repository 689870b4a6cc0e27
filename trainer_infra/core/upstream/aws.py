"""Names Amazon Web Services defines (EKS, its CSI drivers)."""

from __future__ import annotations

#: The EC2 network topology node labels, `…-1` (coarsest) to `…-4`, set by Karpenter from the instance topology.
NETWORK_NODE_LAYER_PREFIX = "topology.k8s.aws/network-node-layer-"
#: The IAM Roles for Service Accounts (IRSA) annotations EKS reads on a ServiceAccount.
IRSA_ROLE_ANNOTATION = "eks.amazonaws.com/role-arn"
IRSA_STS_ANNOTATION = "eks.amazonaws.com/sts-regional-endpoints"
#: The Amazon EFS and FSx for Lustre CSI drivers.
EFS_CSI_DRIVER = "efs.csi.aws.com"
FSX_CSI_DRIVER = "fsx.csi.aws.com"
