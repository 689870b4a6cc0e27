"""Policy as code: one set of rules over Kubernetes manifests and Helm release values, run by two
entry points — offline in `trainer-infra validate`/`render` (render/enforce.py) and live in
`pulumi preview`/`up` through the CrossGuard pack in `policy/` (policy/__main__.py).

Rules see a `Subject` (one Pulumi resource: its type, name, input properties and protection) and
know nothing about where it came from. This package imports only the standard library, so the policy
pack's virtualenv needs nothing but `pulumi-policy`.
"""

from trainer_infra.policy_rules.model import SECRET_MARK, Rule, Subject, Violation
from trainer_infra.policy_rules.rules import RULES, check

__all__ = ["RULES", "SECRET_MARK", "Rule", "Subject", "Violation", "check"]
