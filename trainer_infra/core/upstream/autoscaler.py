"""Names the Kubernetes cluster autoscaler defines for ProvisioningRequests (kubernetes/autoscaler
`cluster-autoscaler/apis`), the API Kueue's ProvisioningRequest admission check writes and the autoscaler answers."""

from __future__ import annotations

#: The Go module of the ProvisioningRequest API; Kueue's go.mod pins the version it is built against.
GO_MODULE = "k8s.io/autoscaler/cluster-autoscaler/apis"
GROUP = "autoscaling.x-k8s.io"
#: The version Kueue 0.19 writes (pkg/controller/admissionchecks/provisioning/controller.go imports .../v1).
PROVISIONING_REQUEST_API = f"{GROUP}/v1"
#: The CRD manifest in that module (config/crd/).
PROVISIONING_REQUEST_CRD = f"config/crd/{GROUP}_provisioningrequests.yaml"
#: The status conditions the autoscaler sets (provisioningrequest/autoscaling.x-k8s.io/v1/types.go).
ACCEPTED = "Accepted"
PROVISIONED = "Provisioned"
FAILED = "Failed"
#: The annotations a pod consuming a granted request carries (Kueue copies them in through podSetUpdates).
CONSUME_ANNOTATION = f"{GROUP}/consume-provisioning-request"
CLASS_ANNOTATION = f"{GROUP}/provisioning-class-name"
