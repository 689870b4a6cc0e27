"""Pod Security at submit: a TrainJob whose runtime patches (or a member's TrainingRuntime whose
pods) the namespace's Pod Security level will refuse is refused at create, with Pod Security's own check name,
so it never holds quota until waitForPodsReady evicts it. The checks and sets are those of
`manifests/pod_security_standards.py` (k8s.io/pod-security-admission v0.34); only what a spec can *set* wrongly is
judged here (what it leaves unset comes from the runtime, which the catalog checks). Capabilities: every added
one is refused already (rule `privileged`), the baseline set included."""

from __future__ import annotations

from trainer_infra.admission.cel import lit
from trainer_infra.admission.model import AdmissionRule, AdmissionSettings, AdmittedKind, Expression
from trainer_infra.core.upstream.kubernetes import POD_SECURITY_ENFORCE as ENFORCE
from trainer_infra.manifests.pod_security_standards import SAFE_SYSCTLS, SELINUX_TYPES
from trainer_infra.manifests.pod_walk import TEMPLATE_LISTS

_LABELS = "namespaceObject.metadata.labels"
LEVEL = f"(has({_LABELS}) && '{ENFORCE}' in {_LABELS} ? {_LABELS}['{ENFORCE}'] : 'privileged')"
KINDS = ("TrainingRuntime", "TrainJob")
_SUFFIX = (
    ": the namespace's Pod Security admission would refuse the job's pods after Kueue charged its quota. "
    "Drop the setting"
)


def _contexts(kind: AdmittedKind, check: str, pod: bool = True) -> str:
    """CEL: `check(sc)` holds for the pod's and every container's securityContext (where set)."""
    parts = [f"(!has(s.securityContext) || ({check.replace('sc.', 's.securityContext.')}))"] if pod else []
    for f in (f for f in kind.pod.containers if f in TEMPLATE_LISTS):  # a pod is never created with ephemeral ones
        parts.append(
            f"(!has(s.{f}) || s.{f}.all(c, !has(c.securityContext) || ({check.replace('sc.', 'c.securityContext.')})))"
        )
    return " && ".join(parts)


def _at_least(level: str, expr: str) -> str:
    levels = ["baseline", "restricted"] if level == "baseline" else ["restricted"]
    return f"!({LEVEL} in {lit(levels)}) || ({expr})"


def _seccomp(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    return _at_least("baseline", _contexts(kind, "!has(sc.seccompProfile) || sc.seccompProfile.type != 'Unconfined'"))


def _apparmor(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    check = "!has(sc.appArmorProfile) || sc.appArmorProfile.type in ['RuntimeDefault', 'Localhost']"
    return _at_least("baseline", _contexts(kind, check))


def _selinux(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    o = "sc.seLinuxOptions"
    check = (
        f"!has({o}) || ((!has({o}.type) || {o}.type in {lit(sorted(SELINUX_TYPES))}) && "
        f"(!has({o}.user) || {o}.user == '') && (!has({o}.role) || {o}.role == ''))"
    )
    return _at_least("baseline", _contexts(kind, check))


def _sysctls(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    check = (
        "!has(s.securityContext) || !has(s.securityContext.sysctls) || "
        f"s.securityContext.sysctls.all(x, x.name in {lit(sorted(SAFE_SYSCTLS))})"
    )
    return _at_least("baseline", check)


def _proc_mount(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    check = _contexts(kind, "!has(sc.procMount) || sc.procMount == 'Default'", pod=False)
    if kind.name != "TrainJob":  # a patch cannot set hostUsers; a pod without host users may unmask /proc
        check = f"(has(s.hostUsers) && !s.hostUsers) || ({check})"
    return _at_least("baseline", check)


def _restricted(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    user = "(!has(sc.runAsNonRoot) || sc.runAsNonRoot) && (!has(sc.runAsUser) || sc.runAsUser != 0)"
    escalation = _contexts(kind, "!has(sc.allowPrivilegeEscalation) || !sc.allowPrivilegeEscalation", pod=False)
    # a patch's `drop` replaces the runtime's list (strategic merge of a plain list): it must still drop ALL
    drop = "!has(sc.capabilities) || !has(sc.capabilities.drop) || 'ALL' in sc.capabilities.drop"
    return _at_least("restricted", f"{_contexts(kind, user)} && {escalation} && {_contexts(kind, drop, pod=False)}")


def _rule(name: str, level: str, check: str, fix: str, build: Expression) -> AdmissionRule:
    message = f'would violate PodSecurity "{level}:latest": {check} ({fix}){_SUFFIX}'
    return AdmissionRule(name, KINDS, message, build, per_pod=True)


SECCOMP = _rule(
    "podSecuritySeccomp",
    "baseline",
    "seccompProfile",
    'pod or containers must not set securityContext.seccompProfile.type to "Unconfined"',
    _seccomp,
)
APPARMOR = _rule(
    "podSecurityAppArmor",
    "baseline",
    "appArmorProfile",
    'pod or containers must not set securityContext.appArmorProfile.type to "Unconfined"',
    _apparmor,
)
SELINUX = _rule(
    "podSecuritySELinux",
    "baseline",
    "seLinuxOptions",
    f"type must be one of {', '.join(sorted(t for t in SELINUX_TYPES if t))} (spc_t is not), user and role unset",
    _selinux,
)
SYSCTLS = _rule(
    "podSecuritySysctls",
    "baseline",
    "forbidden sysctls",
    "only the namespaced safe sysctls (net.ipv4.ip_local_port_range, ...) may be set",
    _sysctls,
)
PROC_MOUNT = _rule(
    "podSecurityProcMount",
    "baseline",
    "procMount",
    'containers must not set securityContext.procMount to "Unmasked"',
    _proc_mount,
)
RESTRICTED = _rule(
    "podSecurityRestricted",
    "restricted",
    "runAsNonRoot != true, runAsUser=0, allowPrivilegeEscalation != false or unrestricted capabilities",
    "a restricted team's pods run as non-root without privilege escalation and drop ALL capabilities: do not "
    "set runAsNonRoot: false, runAsUser: 0, allowPrivilegeEscalation: true or a capabilities.drop without ALL",
    _restricted,
)
