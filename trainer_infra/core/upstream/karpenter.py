"""Names Karpenter defines (kubernetes-sigs/karpenter `pkg/apis/v1`, aws/karpenter-provider-aws `pkg/apis/v1`).

Karpenter is not installed by the platform, so its API versions are the ones the objects are written in here.
"""

from __future__ import annotations

from trainer_infra.core.upstream import kubernetes

GROUP = "karpenter.sh"
#: The API group of the AWS provider's node classes.
AWS_GROUP = "karpenter.k8s.aws"
NODEPOOL_API = f"{GROUP}/v1"
EC2_NODECLASS_API = f"{AWS_GROUP}/v1"
#: The node label with the capacity type (`on-demand`, `spot`).
CAPACITY_TYPE_LABEL = f"{GROUP}/capacity-type"
#: NodePool template label domains Karpenter's CRD rejects (karpenter.sh_nodepools.yaml CEL rules).
RESTRICTED_LABEL_DOMAINS = (kubernetes.DOMAIN, "k8s.io", GROUP, AWS_GROUP)
#: Labels Karpenter v1.15.2 puts on reserved and placement-group nodes (karpenter-provider-aws pkg/apis/v1/labels.go).
RESERVATION_ID_LABEL = f"{AWS_GROUP}/capacity-reservation-id"
RESERVATION_TYPE_LABEL = f"{AWS_GROUP}/capacity-reservation-type"
PLACEMENT_GROUP_ID_LABEL = f"{AWS_GROUP}/placement-group-id"
