"""Pod Security Standard `restricted` as the API server's PodSecurity admission applies it (Kubernetes 1.34).

A port of the checks of `k8s.io/pod-security-admission` v0.34 (`policy/check_*.go`: the baseline checks plus
the restricted ones, with their version overrides), reduced to what a pod *template* can say: same rules,
same container visiting (initContainers, containers, ephemeralContainers), same pod-level fallbacks for
runAsNonRoot and seccompProfile. Used by the `restricted` guard rail and the tests; the e2e proves the
answers against the real admission of the sandbox API server. Kept to the rules, not to the messages.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from trainer_infra.manifests.pod_rules import HOST_NAMESPACES
from trainer_infra.manifests.pod_walk import containers

#: check_capabilities_baseline.go: what baseline lets a container add.
BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)
#: check_restrictedVolumes.go: the only inline volume sources restricted admits.
RESTRICTED_VOLUME_KINDS = frozenset(
    {
        "configMap",
        "csi",
        "downwardAPI",
        "emptyDir",
        "ephemeral",
        "image",
        "persistentVolumeClaim",
        "projected",
        "secret",
    }
)
#: check_sysctls.go (1.32): namespaced, pod-isolated sysctls.
SAFE_SYSCTLS = frozenset(
    {
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.ip_local_reserved_ports",
        "net.ipv4.ip_unprivileged_port_start",
        "net.ipv4.ping_group_range",
        "net.ipv4.tcp_fin_timeout",
        "net.ipv4.tcp_keepalive_intvl",
        "net.ipv4.tcp_keepalive_probes",
        "net.ipv4.tcp_keepalive_time",
        "net.ipv4.tcp_rmem",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.tcp_wmem",
    }
)
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t"})  # check_seLinuxOptions.go
SECCOMP_TYPES = ("RuntimeDefault", "Localhost")  # check_seccompProfile_restricted.go
HANDLERS = ("livenessProbe", "readinessProbe", "startupProbe")  # check_hostProbesAndhostLifecycle.go (1.34)


def _containers(spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for _, c in containers(spec):
        yield f"container {c.get('name', '?')!r}", c


def _host_field(c: Mapping[str, Any]) -> bool:
    handlers = [c.get(p) or {} for p in HANDLERS]
    handlers += [(c.get("lifecycle") or {}).get(h) or {} for h in ("postStart", "preStop")]
    return any((h.get(k) or {}).get("host") for h in handlers for k in ("httpGet", "tcpSocket"))


def _baseline(spec: Mapping[str, Any]) -> list[str]:
    problems: list[str] = []
    pod_sc = spec.get("securityContext") or {}
    for field in HOST_NAMESPACES:
        if spec.get(field) is True:
            problems.append(f"host namespaces: {field}=true")
    if (pod_sc.get("windowsOptions") or {}).get("hostProcess") is True:
        problems.append("hostProcess: pod securityContext.windowsOptions.hostProcess=true")
    bad_sysctls = sorted(s.get("name", "?") for s in pod_sc.get("sysctls") or [] if s.get("name") not in SAFE_SYSCTLS)
    if bad_sysctls:
        problems.append(f"forbidden sysctls: {', '.join(bad_sysctls)}")
    for where, sc in [("pod", pod_sc)] + [(w, c.get("securityContext") or {}) for w, c in _containers(spec)]:
        se = sc.get("seLinuxOptions") or {}
        if se.get("type", "") not in SELINUX_TYPES or se.get("user") or se.get("role"):
            problems.append(f"seLinuxOptions: {where} sets a forbidden SELinux type, user or role")
        if (sc.get("appArmorProfile") or {}).get("type") not in (None, "RuntimeDefault", "Localhost"):
            problems.append(f"appArmorProfile: {where} sets type {sc['appArmorProfile']['type']!r}")
        if (sc.get("seccompProfile") or {}).get("type") == "Unconfined":
            problems.append(f"seccompProfile: {where} is Unconfined")
    for where, c in _containers(spec):
        sc = c.get("securityContext") or {}
        if sc.get("privileged") is True:
            problems.append(f"privileged: {where} is privileged")
        if (sc.get("windowsOptions") or {}).get("hostProcess") is True:
            problems.append(f"hostProcess: {where}")
        if sc.get("procMount") not in (None, "Default") and spec.get("hostUsers") is not False:
            problems.append(f"procMount: {where} sets procMount {sc['procMount']!r}")
        added = [a for a in (sc.get("capabilities") or {}).get("add") or [] if a not in BASELINE_CAPABILITIES]
        if added:
            problems.append(f"capabilities: {where} adds {', '.join(sorted(added))}")
        if any(p.get("hostPort") for p in c.get("ports") or []):
            problems.append(f"hostPort: {where} opens a port on the node")
        if _host_field(c):
            problems.append(f"host probes/lifecycle: {where} sets a probe or lifecycle host")
    return problems


def restricted_problems(spec: Mapping[str, Any]) -> list[str]:
    """Why PodSecurity admission at level `restricted` (1.34) would refuse pods of this spec (empty: admitted).

    Rules, as in k8s.io/pod-security-admission v0.34 policy/: every baseline check, then
    restrictedVolumes, allowPrivilegeEscalation=false, runAsNonRoot=true (pod or every container; a container
    may not set false), runAsUser≠0, seccompProfile RuntimeDefault/Localhost (pod or every container), and
    capabilities drop ALL with at most NET_BIND_SERVICE added. A pod with `hostUsers: false` is
    treated as upstream does only for procMount (the user-namespace relaxation of runAsNonRoot and
    runAsUser is behind a feature gate and not assumed).
    """
    problems = _baseline(spec)
    pod_sc = spec.get("securityContext") or {}
    for v in spec.get("volumes") or []:
        kinds = sorted(k for k in v if k != "name")
        if any(k not in RESTRICTED_VOLUME_KINDS for k in kinds):
            problems.append(f"restricted volume types: volume {v.get('name', '?')!r} is {', '.join(kinds)}")
    if pod_sc.get("runAsNonRoot") is False:
        problems.append("runAsNonRoot != true: pod sets securityContext.runAsNonRoot=false")
    if pod_sc.get("runAsUser") == 0:
        problems.append("runAsUser=0: pod runs as root")
    pod_seccomp = (pod_sc.get("seccompProfile") or {}).get("type")
    for where, c in _containers(spec):
        sc = c.get("securityContext") or {}
        if sc.get("allowPrivilegeEscalation") is not False:
            problems.append(f"allowPrivilegeEscalation != false: {where} must set it to false")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or []):
            problems.append(f"unrestricted capabilities: {where} must drop ALL")
        extra = sorted(a for a in caps.get("add") or [] if a != "NET_BIND_SERVICE")
        if extra:
            problems.append(f"unrestricted capabilities: {where} adds {', '.join(extra)}")
        if sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is not True:
            problems.append(f"runAsNonRoot != true: pod or {where} must set securityContext.runAsNonRoot=true")
        if sc.get("runAsUser") == 0:
            problems.append(f"runAsUser=0: {where} runs as root")
        seccomp = (sc.get("seccompProfile") or {}).get("type") or pod_seccomp
        if seccomp not in SECCOMP_TYPES:
            problems.append(f"seccompProfile: pod or {where} must set type RuntimeDefault or Localhost")
    return problems
