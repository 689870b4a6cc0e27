"""Runtime injection: initializers read the team's Hugging Face token from Secret `hf-token`.

The reference is optional, so one cluster-scoped runtime works in namespaces without a token (public
models) and picks up the token where the team has one (gated models such as Llama)."""

from __future__ import annotations

import copy
from typing import Any

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
