"""Names Karpenter defines (kubernetes-sigs/karpenter `pkg/apis/v1`, aws/karpenter-provider-aws `pkg/apis/v1`).

Karpenter is not installed by the platform, so its API versions are the ones the objects are written in here.
"""

from __future__ import annotations

from trainer_infra.core.upstream import kubernetes

#: The Karpenter core module whose CRDs the rendered NodePool is checked against and whose kwok cloud provider
#: (main package ``./kwok``) the opt-in Karpenter e2e runs: the one place its version is written.
CORE_MODULE = "sigs.k8s.io/karpenter"
CORE_VERSION = "1.15.0"
#: Karpenter 1.15.0's go.mod says ``go 1.26.9``; the project's Go is older, so this one build (and nothing else)
#: runs under the toolchain the go command takes from the module proxy.
CORE_TOOLCHAIN = "go1.27.3"
#: Where ``-X`` stamps the version Karpenter reports (pkg/operator/operator.go ``var Version``).
CORE_VERSION_VARIABLE = f"{CORE_MODULE}/pkg/operator.Version"
#: The kwok cloud provider's node class (kwok/apis/v1alpha1 of the core module).
KWOK_GROUP = "karpenter.kwok.sh"
KWOK_NODECLASS_API = f"{KWOK_GROUP}/v1alpha1"
KWOK_NODECLASS_KIND = "KWOKNodeClass"
GROUP = "karpenter.sh"
#: The API group of the AWS provider's node classes.
AWS_GROUP = "karpenter.k8s.aws"
NODEPOOL_API = f"{GROUP}/v1"
EC2_NODECLASS_API = f"{AWS_GROUP}/v1"
#: The node label with the capacity type (`on-demand`, `spot`).
CAPACITY_TYPE_LABEL = f"{GROUP}/capacity-type"
#: NodePool template label domains Karpenter's CRD rejects (karpenter.sh_nodepools.yaml CEL rules).
RESTRICTED_LABEL_DOMAINS = (kubernetes.DOMAIN, "k8s.io", GROUP, AWS_GROUP)
#: The node disk (ephemeral-storage capacity) Karpenter v1.15.2's AWS provider reports for an EC2NodeClass without
#: block device mappings or instance store policy: the root volume it gives every AMI family by default
#: (karpenter-provider-aws pkg/providers/instancetype/types.go ``ephemeralStorage``,
#: pkg/providers/amifamily/resolver.go ``DefaultEBS`` 20Gi; bottlerocket's data volume is 20Gi too).
DEFAULT_NODE_DISK = "20Gi"
#: Labels Karpenter v1.15.2 puts on reserved and placement-group nodes (karpenter-provider-aws pkg/apis/v1/labels.go).
RESERVATION_ID_LABEL = f"{AWS_GROUP}/capacity-reservation-id"
RESERVATION_TYPE_LABEL = f"{AWS_GROUP}/capacity-reservation-type"
PLACEMENT_GROUP_ID_LABEL = f"{AWS_GROUP}/placement-group-id"
