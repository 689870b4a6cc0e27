"""What the Kubernetes API server accepts, as pure functions: each returns a problem (a sentence) or None.

Transcribed from k8s.io/kubernetes v1.34 `pkg/apis/core/validation` and `pkg/apis/core/helper`
(resource names, quantities, LimitRange, Secret keys), and from distribution/reference (image
references, which the API server takes as any string but the kubelet refuses to pull). Config checks
call these with the config path of the value, so a value the API server would refuse at `pulumi up`
is refused at `validate` instead, where it is written.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping

from trainer_infra.core.quantity import quantity
from trainer_infra.core.upstream import kubernetes, nvidia

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = re.compile(rf"^{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")

# pkg/apis/core/helper: the resources a container may request without a domain, and quota names.
STANDARD_CONTAINER = frozenset({"cpu", "memory", "ephemeral-storage"})
STANDARD_QUOTA = frozenset({
    "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory", "requests.storage",
    "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage", "pods",
    "resourcequotas", "services", "replicationcontrollers", "secrets", "persistentvolumeclaims", "configmaps",
    "services.nodeports", "services.loadbalancers",
})  # fmt: skip
INTEGER_QUOTA = frozenset({
    "pods", "resourcequotas", "services", "replicationcontrollers", "secrets", "configmaps",
    "persistentvolumeclaims", "services.nodeports", "services.loadbalancers",
})  # fmt: skip


def qualified_name_problem(name: str) -> str | None:
    """IsQualifiedName: an optional DNS-subdomain prefix and `/`, then a name of at most 63 characters."""
    prefix, slash, last = name.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        return "the prefix before '/' must be a DNS subdomain (lowercase a-z, 0-9, '-', '.')"
    if not last or len(last) > 63 or not _QUALIFIED_NAME.match(last):
        return "must be at most 63 characters of a-z, A-Z, 0-9, '-', '_', '.', starting and ending alphanumeric"
    return None


def is_native(name: str) -> bool:
    return "/" not in name or f"{kubernetes.DOMAIN}/" in name


def extended_resource_problem(name: str) -> str | None:
    """IsExtendedResourceName: a device plugin resource such as `nvidia.com/gpu`."""
    if is_native(name):
        return f"an extended resource needs a domain outside {kubernetes.DOMAIN}, e.g. {nvidia.GPU}"
    if name.startswith("requests."):
        return "an extended resource name must not start with 'requests.'"
    if qualified_name_problem("requests." + name):
        return f"not a valid extended resource name (domain/name, e.g. {nvidia.GPU})"
    return None


def container_resource_problem(name: str) -> str | None:
    """validateContainerResourceName: cpu, memory, ephemeral-storage, hugepages-*, or an extended resource."""
    if (problem := qualified_name_problem(name)) is not None:
        return problem
    if "/" not in name:
        if name in STANDARD_CONTAINER or name.startswith("hugepages-"):
            return None
        return (
            "not a resource a container can request (cpu, memory, ephemeral-storage, hugepages-<size>, or domain/name)"
        )
    if not is_native(name):
        return extended_resource_problem(name)
    return None


def quota_resource_problem(name: str) -> str | None:
    """ValidateResourceQuotaResourceName."""
    if (problem := qualified_name_problem(name)) is not None:
        return problem
    if "/" not in name and name not in STANDARD_QUOTA and not name.startswith("requests.hugepages-"):
        return f"not a quota resource (e.g. requests.cpu, limits.memory, pods, requests.{nvidia.GPU}, count/jobs.batch)"
    return None


def is_integer_resource(name: str) -> bool:
    """IsIntegerResourceName: counts and extended resources (GPUs come whole)."""
    return name in INTEGER_QUOTA or name.startswith("count/") or extended_resource_problem(name) is None


def quantity_problem(resource: str, value: str) -> str | None:
    """ValidateResourceQuantityValue: non-negative, and whole for integer resources."""
    amount = quantity(value)
    if amount < 0:
        return "must not be negative"
    if is_integer_resource(resource) and (amount * 1000) % 1000 != 0:
        return f"{resource} comes in whole units"
    return None


def requirements_problems(requests: Mapping[str, str], limits: Mapping[str, str]) -> list[tuple[str, str]]:
    """validateResourceRequirements for one container: (`requests.cpu`-style key, problem)."""
    out: list[tuple[str, str]] = []
    for section, values in (("limits", limits), ("requests", requests)):
        for name, value in values.items():
            problem = container_resource_problem(name) or quantity_problem(name, value)
            if problem:
                out.append((f"{section}.{name}", problem))
    for name, value in requests.items():
        overcommit = is_native(name) and not name.startswith("hugepages-")
        if name in limits:
            want, got = quantity(limits[name]), quantity(value)
            if not overcommit and got != want:
                out.append((f"requests.{name}", f"must equal the {name} limit {limits[name]}"))
            elif got > want:
                out.append((f"requests.{name}", f"must not exceed the {name} limit {limits[name]}"))
        elif not overcommit:
            out.append((f"limits.{name}", f"{name} needs a limit equal to its request (it cannot be overcommitted)"))
    return out


def limit_range_problems(bounds: Mapping[str, Mapping[str, str]]) -> list[tuple[str, str]]:
    """ValidateLimitRange (type Container): min ≤ defaultRequest ≤ default ≤ max, per resource.
    `bounds` maps `min`, `max`, `default`, `defaultRequest` to {resource: quantity}."""
    out: list[tuple[str, str]] = []
    for kind, values in bounds.items():
        for name, value in values.items():
            problem = container_resource_problem(name) or quantity_problem(name, value)
            if problem:
                out.append((f"{kind}.{name}", problem))
    order = ("min", "defaultRequest", "default", "max")
    names = sorted({n for values in bounds.values() for n in values})
    for name in names:
        present = [(k, quantity(bounds[k][name])) for k in order if name in bounds.get(k, {})]
        for i, (low_kind, low) in enumerate(present):
            for high_kind, high in present[i + 1 :]:
                if low > high:
                    out.append(
                        (
                            f"{high_kind}.{name}",
                            f"{high_kind} {bounds[high_kind][name]} is below {low_kind} {bounds[low_kind][name]}",
                        )
                    )
    return out


def secret_key_problem(key: str) -> str | None:
    """IsConfigMapKey: the keys of a Secret's data."""
    if len(key) > 253 or not _SECRET_KEY.match(key) or key in (".", "..") or key.startswith(".."):
        return "a Secret key is at most 253 characters of a-z, A-Z, 0-9, '-', '_', '.' (not '.' or '..')"
    return None


def host_problem(host: str) -> str | None:
    """A DNS name or an IP address (NFS server, registry host)."""
    try:
        ipaddress.ip_address(host.strip("[]"))
        return None
    except ValueError:
        pass
    labels = host.split(".")
    if len(host) > 253 or not all(re.match(r"^[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?$", x) for x in labels):
        return "must be a host name (letters, digits, '-', '.') or an IP address"
    return None


def path_problem(path: str) -> str | None:
    """validatePathNoBacksteps + absolute, as mount paths and hostPath paths need."""
    if not path.startswith("/"):
        return "must be an absolute path"
    if ".." in path.split("/"):
        return "must not contain '..'"
    return None


# distribution/reference (the grammar the kubelet and every registry client parse image names with).
_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN_NAME = rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*"
_IPV6 = r"\[(?:[a-fA-F0-9:]+)\]"
_HOST = rf"(?:{_DOMAIN_NAME}|{_IPV6})"
_DOMAIN = rf"{_HOST}(?::(?P<port>[0-9]+))?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_NAME = rf"(?:(?P<domain>{_DOMAIN})/)?(?P<path>{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
IMAGE_REFERENCE = re.compile(rf"^{_NAME}(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?$")
REGISTRY_PREFIX = re.compile(rf"^(?P<domain>{_DOMAIN})(?:/(?P<path>{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*))?$")


def _port_problem(port: str | None) -> str | None:
    if port is not None and not 1 <= int(port) <= 65535:
        return f"port {port} is not between 1 and 65535"
    return None


def image_reference_problem(ref: str) -> str | None:
    """None if `ref` parses as an image reference (lowercase repository path, optional tag and digest)."""
    match = IMAGE_REFERENCE.match(ref)
    if match is None:
        return (
            "not an image reference: [host[:port]/]path[:tag][@digest] with a lowercase path "
            "(a-z, 0-9, '.', '_', '-' between components)"
        )
    domain = match.group("domain") or ""
    if domain and not ("." in domain or ":" in domain or domain == "localhost") and domain != domain.lower():
        return f"'{domain}' is read as a repository path component, which must be lowercase"
    if len(match.group("path")) + len(domain) + 1 > 255:
        return "the repository name is longer than 255 characters"
    return _port_problem(match.group("port"))


def registry_prefix_problem(prefix: str) -> str | None:
    """A registry mirror `host[:port][/path]`: what image references are rewritten under."""
    match = REGISTRY_PREFIX.match(prefix)
    if match is None:
        return "not a registry host[:port][/path]: no scheme, a lowercase path"
    return _port_problem(match.group("port"))
