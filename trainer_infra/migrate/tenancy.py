"""What a team member may not run, checked on a pod template (plain dict) before a job is migrated.

The Pod Security `baseline` checks use the API server's own wording (k8s.io/pod-security-admission
`policy/check_*.go`), so a refused migration reads exactly like the refusal the member would see at
admission: `violates PodSecurity "baseline:v1.34": hostPath volumes (volume "data")`. They apply whatever
the namespace's level, because the platform refuses these fields in team namespaces outright. The platform's
own rules (`manifests/pod_rules.py`, the vocabulary the admission policies are built from) add to them: only
the in-pod volume kinds and the team's claims (inline nfs/csi/… reach any team's data; a claim cannot follow a
job into a new namespace), no added capabilities or privilege escalation, only the team's service accounts.
One function per rule; RULES lists them in the order they are reported. A vocabulary rule this module does
not word itself (WORDED) is reported in the vocabulary's words, so a new pod rule reaches `migrate` too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from trainer_infra.manifests.pod_rules import (
    ALLOWED_CAPABILITIES,
    DEFAULT_SERVICE_ACCOUNT,
    HOST_NAMESPACES,
    SAFE_VOLUME_KINDS,
    Lists,
)
from trainer_infra.manifests.pod_rules import RULES as POD_RULES
from trainer_infra.manifests.pod_security_standards import BASELINE_CAPABILITIES
from trainer_infra.manifests.pod_walk import TEMPLATE_LISTS, containers

#: the vocabulary's rules that the functions below word (as Pod Security and the admission messages do)
WORDED = frozenset({"volumes", "claims", "host", "privileged", "hostPort", "serviceAccount"})


@dataclass(frozen=True)
class Context:
    source_namespace: str
    namespace: str  # where the TrainJob goes
    pod_security: str  # e.g. baseline:v1.34
    claims: tuple[str, ...] = ()  # the team's claims
    service_accounts: tuple[str, ...] = ()  # the team's service accounts besides `default`


@dataclass(frozen=True)
class Refusal:
    path: str  # inside the pod spec, e.g. volumes[0].hostPath
    reason: str  # Pod Security's forbidden reason or the platform rule
    detail: str
    pod_security: bool  # worded as a Pod Security violation


Rule = Callable[[dict[str, Any], Context], Iterator[Refusal]]


def _dict(value: Any) -> dict[str, Any]:
    """Input is hostile: a field of the wrong type is judged as absent here (the converter reports its type)."""
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _containers(pod: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """A migrated job's containers: it becomes a TrainJob, whose runtimePatches carry no ephemeral containers."""
    return containers(pod, TEMPLATE_LISTS)


def _host_namespaces(pod: dict[str, Any], ctx: Context) -> Iterator[Refusal]:
    for key in HOST_NAMESPACES:
        if pod.get(key) is True:
            yield Refusal(key, "host namespaces", f"{key}=true", True)


def _security(path: str, c: dict[str, Any], field: str, reason: str, says: str, pod_security: bool) -> Refusal:
    """A refusal of one container's `securityContext.<field>`; `says` follows the container's quoted name."""
    return Refusal(f"{path}.securityContext.{field}", reason, f'container "{c.get("name")}"{says}', pod_security)


def _privileged(pod: dict[str, Any], ctx: Context) -> Iterator[Refusal]:
    for path, c in _containers(pod):
        if _dict(c.get("securityContext")).get("privileged") is True:
            yield _security(path, c, "privileged", "privileged", " must not set securityContext.privileged=true", True)


def _capabilities(pod: dict[str, Any], ctx: Context) -> Iterator[Refusal]:
    for path, c in _containers(pod):
        added = _list(_dict(_dict(c.get("securityContext")).get("capabilities")).get("add"))
        bad = sorted(str(a) for a in added if str(a) not in BASELINE_CAPABILITIES)
        if bad:
            caps = ", ".join(f'"{a}"' for a in bad)
            says = f" must not include {caps} in securityContext.capabilities.add"
            yield _security(path, c, "capabilities.add", "non-default capabilities", says, True)
        elif refused := [a for a in added if str(a) not in ALLOWED_CAPABILITIES]:
            # the platform refuses every added capability but NET_BIND_SERVICE, baseline ones too
            says = f": capabilities.add {sorted(map(str, refused))} is refused in team namespaces"
            yield _security(path, c, "capabilities.add", "added capabilities", says, False)


def _escalation(pod: dict[str, Any], ctx: Context) -> Iterator[Refusal]:
    if _dict(_dict(pod.get("securityContext")).get("windowsOptions")).get("hostProcess") is True:
        detail = "pod must not set securityContext.windowsOptions.hostProcess=true"
        yield Refusal("securityContext.windowsOptions.hostProcess", "hostProcess", detail, True)
    for path, c in _containers(pod):
        sc = _dict(c.get("securityContext"))
        if sc.get("allowPrivilegeEscalation") is True:
            says = ": allowPrivilegeEscalation=true is refused in team namespaces"
            yield _security(path, c, "allowPrivilegeEscalation", "privilege escalation", says, False)
        if _dict(sc.get("windowsOptions")).get("hostProcess") is True:
            says = " must not set securityContext.windowsOptions.hostProcess=true"
            yield _security(path, c, "windowsOptions.hostProcess", "hostProcess", says, True)


def _host_ports(pod: dict[str, Any], ctx: Context) -> Iterator[Refusal]:
    for path, c in _containers(pod):
        for p, port in enumerate(_list(c.get("ports"))):
            if isinstance(port, dict) and port.get("hostPort"):
                detail = f'container "{c.get("name")}" uses hostPort {port["hostPort"]}'
                yield Refusal(f"{path}.ports[{p}].hostPort", "hostPort", detail, True)


def _host_path(pod: dict[str, Any], ctx: Context) -> Iterator[Refusal]:
    for v, vol in enumerate(_list(pod.get("volumes"))):
        if isinstance(vol, dict) and "hostPath" in vol:
            yield Refusal(f"volumes[{v}].hostPath", "hostPath volumes", f'volume "{vol.get("name")}"', True)


def _inline_volumes(pod: dict[str, Any], ctx: Context) -> Iterator[Refusal]:
    for v, vol in enumerate(_list(pod.get("volumes"))):
        if not isinstance(vol, dict):
            continue
        for kind in sorted(set(vol) - set(SAFE_VOLUME_KINDS) - {"name", "hostPath"}):
            yield Refusal(
                f"volumes[{v}].{kind}",
                "inline volume",
                f'volume "{vol.get("name")}": inline {kind} volumes are refused in team namespaces '
                "(they reach storage past the team's claims); mount a claim of the team namespace",
                False,
            )


def _foreign_claims(pod: dict[str, Any], ctx: Context) -> Iterator[Refusal]:
    """Only the team's claims: a claim of the v1 job's old namespace cannot follow it, and a claim the
    platform did not create for the team is not the team's."""
    for v, vol in enumerate(_list(pod.get("volumes"))):
        claim = _dict(_dict(vol).get("persistentVolumeClaim")).get("claimName")
        if not claim:
            continue
        path = f"volumes[{v}].persistentVolumeClaim.claimName"
        if ctx.source_namespace != ctx.namespace:
            yield Refusal(
                path,
                "claim of another namespace",
                f'volume "{vol.get("name")}": claim {claim!r} lives in namespace {ctx.source_namespace!r}; '
                f"a pod in {ctx.namespace!r} can only mount claims of its own namespace (copy the data first)",
                False,
            )
        elif claim not in ctx.claims:
            yield Refusal(
                path,
                "not a team claim",
                f'volume "{vol.get("name")}": claim {claim!r} is not one of the team\'s claims '
                f"({', '.join(ctx.claims) or 'none'})",
                False,
            )


def _service_account(pod: dict[str, Any], ctx: Context) -> Iterator[Refusal]:
    name = pod.get("serviceAccountName")
    if name and name != DEFAULT_SERVICE_ACCOUNT and name not in ctx.service_accounts:
        yield Refusal(
            "serviceAccountName",
            "service account",
            f"serviceAccountName {name!r} is not one of the team's service accounts "
            f"(default{''.join(', ' + s for s in ctx.service_accounts)})",
            False,
        )


def _other_pod_rules(pod: dict[str, Any], ctx: Context) -> Iterator[Refusal]:
    """The vocabulary's rules not worded above (the target's priority classes are not known here)."""
    lists = Lists(claims=ctx.claims, service_accounts=(DEFAULT_SERVICE_ACCOUNT, *ctx.service_accounts))
    for rule in POD_RULES:
        if rule.name not in WORDED:
            for problem in rule.problems(pod, lists):
                yield Refusal(rule.name, rule.name, problem, False)


RULES: tuple[Rule, ...] = (
    _host_namespaces,
    _privileged,
    _capabilities,
    _escalation,
    _host_ports,
    _host_path,
    _inline_volumes,
    _foreign_claims,
    _service_account,
    _other_pod_rules,
)


def refusals(pod: dict[str, Any], ctx: Context) -> list[Refusal]:
    return [r for rule in RULES for r in rule(pod, ctx)]


def admission_message(pod_name: str, found: list[Refusal], ctx: Context) -> str:
    """The message the API server gives for these refusals (Pod Security ones grouped by reason, as it does)."""
    parts: list[str] = []
    by_reason: dict[str, list[str]] = {}
    for r in found:
        if r.pod_security:
            by_reason.setdefault(r.reason, []).append(r.detail)
    if len(by_reason.get("hostPath volumes", [])) > 1:  # check_hostPathVolumes.go: `volumes "a", "b"`
        names = ", ".join(d.removeprefix("volume ") for d in by_reason["hostPath volumes"])
        by_reason["hostPath volumes"] = [f"volumes {names}"]
    if by_reason:
        reasons = ", ".join(f"{reason} ({', '.join(details)})" for reason, details in by_reason.items())
        parts.append(f'pods "{pod_name}" is forbidden: violates PodSecurity "{ctx.pod_security}": {reasons}')
    parts.extend(r.detail for r in found if not r.pod_security)
    return "; ".join(parts)
