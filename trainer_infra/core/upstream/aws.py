"""Names Amazon Web Services defines (EKS, its CSI drivers)."""

from __future__ import annotations

#: The EC2 network topology node labels, `…-1` (coarsest) to `…-4`, set by the AWS
#: cloud-controller-manager from ec2:DescribeInstanceTopology (Karpenter does not set them).
NETWORK_NODE_LAYER_PREFIX = "topology.k8s.aws/network-node-layer-"
#: The IAM Roles for Service Accounts (IRSA) annotations EKS reads on a ServiceAccount.
IRSA_ROLE_ANNOTATION = "eks.amazonaws.com/role-arn"
IRSA_STS_ANNOTATION = "eks.amazonaws.com/sts-regional-endpoints"
#: The Amazon EFS and FSx for Lustre CSI drivers.
EFS_CSI_DRIVER = "efs.csi.aws.com"
FSX_CSI_DRIVER = "fsx.csi.aws.com"
#: The zone ID node label the AWS cloud-controller-manager sets (kubernetes/cloud-provider-aws well_known_labels.go).
ZONE_ID_LABEL = "topology.k8s.aws/zone-id"
#: The extended resource the EFA device plugin advertises (karpenter-provider-aws v1.15.2 pkg/apis/v1/labels.go).
EFA_RESOURCE = "vpc.amazonaws.com/efa"
#: Labels EKS itself puts on managed node group nodes (EKS user guide, managed-node-groups).
NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"
NODEGROUP_CAPACITY_TYPE_LABEL = "eks.amazonaws.com/capacityType"
