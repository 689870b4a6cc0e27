"""The harness's webhook rewriting: trainer_infra/sandbox/webhooks.py."""

from trainer_infra.sandbox.webhooks import (
    MANAGED_BY,
    apply_json_patch,
    load_kustomized_webhooks,
    load_upstream_webhooks,
    localize,
)

__all__ = ["MANAGED_BY", "apply_json_patch", "load_kustomized_webhooks", "load_upstream_webhooks", "localize"]
