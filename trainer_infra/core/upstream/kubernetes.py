"""Names Kubernetes itself defines: well-known labels, annotations and types (kubernetes.io/docs/reference/labels-
annotations-taints), and the built-in API versions the platform writes (stable, so not in the version matrix)."""

from __future__ import annotations

#: The domain reserved for Kubernetes' own names; a resource in it (or a subdomain) is native, not a device's.
DOMAIN = "kubernetes.io"

# Node labels the kubelet sets.
HOSTNAME_LABEL = f"{DOMAIN}/hostname"
ARCH_LABEL = f"{DOMAIN}/arch"
OS_LABEL = f"{DOMAIN}/os"
ZONE_LABEL = f"topology.{DOMAIN}/zone"
INSTANCE_TYPE_LABEL = f"node.{DOMAIN}/instance-type"

#: The Job controller's label (and annotation) with an Indexed Job pod's completion index.
JOB_COMPLETION_INDEX = f"batch.{DOMAIN}/job-completion-index"
#: The per-container AppArmor annotation prefix (beta; Pod Security still judges it).
APPARMOR_CONTAINER_PREFIX = f"container.apparmor.security.beta.{DOMAIN}/"
#: The label every namespace carries with its own name.
NAMESPACE_NAME_LABEL = f"{DOMAIN}/metadata.name"
#: Pod Security Admission's namespace labels: `<prefix>/enforce`, `…/enforce-version`, `…/warn`, `…/audit`.
POD_SECURITY_PREFIX = f"pod-security.{DOMAIN}"
POD_SECURITY_ENFORCE = f"{POD_SECURITY_PREFIX}/enforce"

# The recommended application labels (app.kubernetes.io/*).
APP_NAME = f"app.{DOMAIN}/name"
APP_INSTANCE = f"app.{DOMAIN}/instance"
APP_COMPONENT = f"app.{DOMAIN}/component"
APP_PART_OF = f"app.{DOMAIN}/part-of"
APP_MANAGED_BY = f"app.{DOMAIN}/managed-by"

#: The annotation `kubectl apply` writes (and rewrites) with the last applied object.
LAST_APPLIED = f"kubectl.{DOMAIN}/last-applied-configuration"
#: A Secret the token controller fills with a ServiceAccount's token, and the annotation naming the account.
SERVICE_ACCOUNT_TOKEN_TYPE = f"{DOMAIN}/service-account-token"
SERVICE_ACCOUNT_NAME_ANNOTATION = f"{DOMAIN}/service-account.name"
#: Where a pod's projected ServiceAccount token is mounted.
SERVICE_ACCOUNT_TOKEN_PATH = f"/var/run/secrets/{DOMAIN}/serviceaccount/token"

#: The registry of the Kubernetes project's images.
REGISTRY = "registry.k8s.io"
#: The pause image (kubernetes/kubernetes `build/pause`): a container that does nothing, small and multi-arch.
PAUSE_IMAGE = f"{REGISTRY}/pause:3.10"

# Built-in API groups and the stable versions the platform writes.
APIEXTENSIONS_GROUP = "apiextensions.k8s.io"
APIEXTENSIONS_API = f"{APIEXTENSIONS_GROUP}/v1"
RBAC_GROUP = "rbac.authorization.k8s.io"
RBAC_API = f"{RBAC_GROUP}/v1"
COORDINATION_GROUP = "coordination.k8s.io"
EVENTS_GROUP = "events.k8s.io"
ADMISSION_API = "admissionregistration.k8s.io/v1"
NETWORKING_API = "networking.k8s.io/v1"
STORAGE_API = "storage.k8s.io/v1"
