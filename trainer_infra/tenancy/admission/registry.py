"""The admission rules, in the order each kind's policy checks them. A new rule is one `AdmissionRule` in a
module of this package plus one line here; the kinds it names get it in their policy."""

from __future__ import annotations

from trainer_infra.core.registry import Registry
from trainer_infra.tenancy.admission import pods, requests
from trainer_infra.tenancy.admission.model import AdmissionRule

RULES: Registry[AdmissionRule] = Registry(
    requests.KNOWN_TEAM,
    pods.VOLUMES,
    pods.CLAIMS,
    pods.HOST,
    pods.PRIVILEGED,
    pods.HOST_PORTS,
    pods.NODE_NAME,
    pods.PRIORITY_CLASS,
    pods.SERVICE_ACCOUNT,
    requests.CLAIM_TEMPLATES,
    requests.QUEUE,
    requests.SUSPEND,
)
