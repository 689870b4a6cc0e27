"""The admission rules, in the order each kind's policy checks them. A new rule is one `AdmissionRule` in a
module of this package plus one line here; the kinds it names get it in their policy."""

from __future__ import annotations

from trainer_infra.core.registry import Registry
from trainer_infra.tenancy.admission import deputies, pod_security, pods, requests, write_back
from trainer_infra.tenancy.admission.model import AdmissionRule

RULES: Registry[AdmissionRule] = Registry(
    requests.KNOWN_TEAM,
    *pods.RULES,  # one per rule of manifests/pod_rules.py
    deputies.DEVICE_ENV,
    deputies.RESOURCE_CLAIMS,
    deputies.DEPUTY_PODS,
    pod_security.SECCOMP,
    pod_security.APPARMOR,
    pod_security.SELINUX,
    pod_security.SYSCTLS,
    pod_security.PROC_MOUNT,
    pod_security.RESTRICTED,
    requests.CLAIM_TEMPLATES,
    requests.PATCH_CLAIM_VOLUME,
    requests.QUEUE,
    requests.SUSPEND,
    deputies.POD_QUEUE,
    deputies.TRAINER_DEVICE_ENV,
    deputies.INITIALIZER_ENV,
    deputies.DEPUTY_RUNTIME,
    deputies.CONTROLLER_LABELS,
    deputies.INITIALIZER_PATCHES,
    *write_back.RULES,  # one per part of the spec (trainer, initializer, runtimePatches, the rest)
)
