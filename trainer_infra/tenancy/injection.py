"""Runtime injections: initializers read the team's Hugging Face token from Secret `hf-token`, and download
from the Hub the platform names (`tenancy.hub.endpoint`).

The reference is optional, so one cluster-scoped runtime works in namespaces without a token (public
models) and picks up the token where the team has one (gated models such as Llama). The endpoint is set in the
initializer containers only, over whatever a runtime file says: it decides where the token is sent."""

from __future__ import annotations

import copy
from typing import Any

from trainer_infra.core.upstream import huggingface
from trainer_infra.manifests.pod_walk import MAIN_LISTS, containers
from trainer_infra.manifests.runtime import INITIALIZERS, pod_spec, replicated_jobs
from trainer_infra.tenancy.secrets import HF_TOKEN_KEY, HF_TOKEN_SECRET


def hf_token_env(some_team_has_token: bool, runtime: dict[str, Any]) -> dict[str, Any]:
    if not some_team_has_token:
        return runtime
    out = copy.deepcopy(runtime)
    env = {
        "name": HF_TOKEN_KEY,
        "valueFrom": {"secretKeyRef": {"name": HF_TOKEN_SECRET, "key": HF_TOKEN_KEY, "optional": True}},
    }
    for job in replicated_jobs(out):
        for _, container in containers(pod_spec(job), MAIN_LISTS):
            if container.get("name") in INITIALIZERS and all(
                e.get("name") != HF_TOKEN_KEY for e in container.get("env", [])
            ):
                container["env"] = [*container.get("env", []), dict(env)]
    return out


def hub_endpoint_env(endpoint: str | None, runtime: dict[str, Any]) -> dict[str, Any]:
    if endpoint is None:
        return runtime
    out = copy.deepcopy(runtime)
    for job in replicated_jobs(out):
        for _, container in containers(pod_spec(job), MAIN_LISTS):
            if container.get("name") in INITIALIZERS:
                env = [e for e in container.get("env", []) if e.get("name") != huggingface.ENDPOINT_ENV]
                container["env"] = [*env, {"name": huggingface.ENDPOINT_ENV, "value": endpoint}]
    return out
