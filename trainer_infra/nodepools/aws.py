"""AWS facts the `karpenter` and `eks` backends share: which node labels exist on EC2 nodes and who sets them,
which instance types carry EFA interfaces and network topology. Each fact names its source.

Who labels an EC2 node (checked in the sources, not assumed):
- The AWS cloud-controller-manager (kubernetes/cloud-provider-aws ≥ v1.32.0, `pkg/providers/v1/instances_v2.go`
  `getAdditionalLabels`, `well_known_labels.go`) sets `topology.k8s.aws/zone-id` and, from
  `ec2:DescribeInstanceTopology`, `topology.k8s.aws/network-node-layer-1..N` while it initialises a node, whoever
  launched it (EKS runs it in the control plane; managed node groups and Karpenter nodes both get them).
- Karpenter (karpenter-provider-aws v1.15.2, `pkg/cloudprovider/cloudprovider.go` `instanceToNodeClaim`) sets
  the zone, `karpenter.sh/capacity-type`, and for reserved capacity `karpenter.k8s.aws/capacity-reservation-id`
  and `-type`; with a placement group `karpenter.k8s.aws/placement-group-id`. It never sets the network layers
  (no occurrence of `network-node-layer` in v1.15.2) and no `topology.k8s.aws/capacity-block-id`.
- EKS managed node groups set `eks.amazonaws.com/nodegroup` and `eks.amazonaws.com/capacityType`
  (EKS user guide, managed-node-groups: "Amazon EKS automatically adds Kubernetes labels").
"""

from __future__ import annotations

from trainer_infra.core.upstream import aws as upstream_aws

ZONE_ID = upstream_aws.ZONE_ID_LABEL
NETWORK_LAYER_PREFIX = upstream_aws.NETWORK_NODE_LAYER_PREFIX
NETWORK_LAYERS = tuple(f"{NETWORK_LAYER_PREFIX}{i}" for i in range(1, 5))
#: The extended resource the EFA device plugin advertises and Karpenter sizes launches by (karpenter-provider-aws
#: v1.15.2 pkg/apis/v1/labels.go `ResourceEFA`).
EFA_RESOURCE = upstream_aws.EFA_RESOURCE
#: The volume the kubelet's root dir, so pods' ephemeral storage and the images, lives on, per AMI family: the root
#: volume of AL2/AL2023, Bottlerocket's data volume (its OS is on /dev/xvda). Karpenter takes a node's
#: ephemeral-storage from it (karpenter-provider-aws v1.15.2 pkg/providers/amifamily al2.go, al2023.go,
#: bottlerocket.go `EphemeralBlockDevice`); the EKS AMIs of the same families are laid out alike.
EPHEMERAL_DEVICE = {"al2": "/dev/xvda", "al2023": "/dev/xvda", "bottlerocket": "/dev/xvdb"}

#: Instance types `ec2:DescribeInstanceTopology` answers for, and how many network layers it returns
#: (EC2 user guide, "Prerequisites for Amazon EC2 topology", instance types: 3 network nodes, or 4 for
#: p6-b200/p6-b300). A family entry (`g6e.`) covers every size of it.
TOPOLOGY_LAYERS: dict[str, int] = {
    **dict.fromkeys(("g6e.", "g7e.", "hpc6a.", "hpc6id.", "hpc7a.", "hpc7g.", "trn1.", "trn1n.", "trn2.", "trn2u."), 3),
    **dict.fromkeys(
        ("p3dn.24xlarge", "p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "p5en.48xlarge"), 3
    ),
    "p6e-gb200.36xlarge": 3,
    "p6-b200.48xlarge": 4,
    "p6-b300.48xlarge": 4,
}

#: EFA interfaces per instance type (`vpc.amazonaws.com/efa` capacity = EC2 `EfaInfo.MaximumEfaInterfaces`), from
#: Karpenter's generated instance-type reference (aws/karpenter-provider-aws
#: website/content/en/docs/reference/instance-types.md at 1d927085); GPU and Trainium types only.
EFA_INTERFACES: dict[str, int] = {
    **dict.fromkeys(("g5.8xlarge", "g5.12xlarge", "g5.16xlarge", "g5.24xlarge", "g5.48xlarge"), 1),
    **dict.fromkeys(("g6.8xlarge", "g6.12xlarge", "g6.16xlarge", "g6.24xlarge", "g6.48xlarge"), 1),
    **{"g6e.8xlarge": 1, "g6e.12xlarge": 1, "g6e.16xlarge": 1, "g6e.24xlarge": 2, "g6e.48xlarge": 4},
    **{"g7e.8xlarge": 1, "g7e.12xlarge": 1, "g7e.24xlarge": 2, "g7e.48xlarge": 4},
    **{"p3dn.24xlarge": 1, "p4d.24xlarge": 4, "p4de.24xlarge": 4, "p5.4xlarge": 1, "p5.48xlarge": 32},
    **{"p5e.48xlarge": 32, "p5en.48xlarge": 16, "p6-b200.48xlarge": 8, "p6-b300.48xlarge": 16},
    **{"trn1.32xlarge": 8, "trn1n.32xlarge": 16, "trn2.48xlarge": 16},
}


def topology_layers(instance_type: str) -> int:
    """Network layers the cloud-controller-manager labels a node of this type with (0: none)."""
    if instance_type in TOPOLOGY_LAYERS:
        return TOPOLOGY_LAYERS[instance_type]
    family = instance_type.split(".", 1)[0] + "."
    return TOPOLOGY_LAYERS.get(family, 0)


def network_levels(instance_types: list[str]) -> tuple[str, ...]:
    """The network-layer keys every node of these types carries (the fewest layers among them)."""
    layers = min((topology_layers(t) for t in instance_types), default=0)
    return NETWORK_LAYERS[:layers]


def without_efa(instance_types: list[str]) -> list[str]:
    return [t for t in instance_types if not EFA_INTERFACES.get(t)]


def without_topology(instance_types: list[str]) -> list[str]:
    return [t for t in instance_types if not topology_layers(t)]
