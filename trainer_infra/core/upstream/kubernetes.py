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
#: The node-role label kubeadm puts on a control-plane node.
CONTROL_PLANE_ROLE_LABEL = f"node-role.{DOMAIN}/control-plane"
#: The annotation the node TTL controller writes on each Node (how long its kubelet may cache objects).
NODE_TTL_ANNOTATION = f"node.alpha.{DOMAIN}/ttl"
#: The label the EndpointSlice controller sets on each slice with the name of its Service.
SERVICE_NAME_LABEL = f"{DOMAIN}/service-name"
#: The label the cluster add-ons carry with their display name (kubeadm's kube-dns Service: `CoreDNS`).
ADDON_NAME_LABEL = f"{DOMAIN}/name"

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
PAUSE_REPOSITORY = f"{REGISTRY}/pause"
PAUSE_IMAGE = f"{PAUSE_REPOSITORY}:3.10"
#: CoreDNS's image as the project publishes it (kubeadm's cluster DNS), without its tag.
COREDNS_REPOSITORY = f"{REGISTRY}/coredns/coredns"

#: The Go module of Kubernetes' own commands (API server, kubelet, kube-proxy) and of its OpenAPI spec.
GO_MODULE = "k8s.io/kubernetes"
#: The Go packages whose version variables the release build stamps (hack/lib/version.sh `kube::version::ldflag`).
VERSION_PACKAGES = ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version")

# Built-in API groups and the stable versions the platform writes.
APIEXTENSIONS_GROUP = "apiextensions.k8s.io"
APIEXTENSIONS_API = f"{APIEXTENSIONS_GROUP}/v1"
APPS_API = "apps/v1"
RBAC_GROUP = "rbac.authorization.k8s.io"
RBAC_API = f"{RBAC_GROUP}/v1"
COORDINATION_GROUP = "coordination.k8s.io"
EVENTS_GROUP = "events.k8s.io"
ADMISSION_API = "admissionregistration.k8s.io/v1"
NETWORKING_GROUP = "networking.k8s.io"
NETWORKING_API = f"{NETWORKING_GROUP}/v1"
DISCOVERY_GROUP = "discovery.k8s.io"
DISCOVERY_API = f"{DISCOVERY_GROUP}/v1"
#: The kubelet's and kube-proxy's configuration file APIs (KubeletConfiguration, KubeProxyConfiguration).
KUBELET_CONFIG_API = "kubelet.config.k8s.io/v1beta1"
KUBE_PROXY_CONFIG_API = "kubeproxy.config.k8s.io/v1alpha1"
STORAGE_API = "storage.k8s.io/v1"
#: The node-disk resource of a container (writable layer, logs, disk-backed emptyDirs).
EPHEMERAL_STORAGE = "ephemeral-storage"
