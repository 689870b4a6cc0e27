"""The Pulumi program: live config → validated stack → plan → TrainingPlatform."""

from __future__ import annotations

from typing import Any

import pulumi
from pulumi.runtime.config import CONFIG, get_config_env, get_config_secret_keys_env, is_config_secret

from trainer_infra.core.objects import FleetPlan, Plan
from trainer_infra.platform.component import TrainingPlatform
from trainer_infra.platform.fleet_component import Fleet
from trainer_infra.platform.shard import deploy_team_shard
from trainer_infra.platform.stack_traces import trim_stack_traces
from trainer_infra.stack.build import build_plan
from trainer_infra.stack.fleet_plans import build_fleet, is_fleet, validate_fleet
from trainer_infra.stack.load import NAMESPACE, raw_from_pulumi_env
from trainer_infra.stack.shards import check_stack, layout, parse_shard_stack, select
from trainer_infra.stack.validate import Validated, validate


def _raw() -> dict[str, Any]:
    # The language host hands config over with set_all_config; PULUMI_CONFIG is the older channel.
    everything = {**get_config_env(), **CONFIG.get()}
    return raw_from_pulumi_env(everything)


def load_from_pulumi() -> Validated:
    raw = _raw()
    return validate(raw, f"stack {pulumi.get_stack()}", secret_keys=_secret_keys(raw))


def _secret_keys(raw: dict[str, Any]) -> frozenset[str]:
    listed = set(get_config_secret_keys_env())
    prefix = f"{NAMESPACE}:"
    return frozenset(k for k in raw if is_config_secret(prefix + k) or prefix + k in listed)


def deploy_fleet(fleet: FleetPlan) -> Fleet:
    """Every cluster of a fleet in one program: one provider per cluster, one preview for all."""
    component = Fleet("fleet", fleet)
    pulumi.export("clusters", component.clusters)
    return component


def deploy(plan: Plan) -> TrainingPlatform:
    """Register the plan's resources and the stack outputs (what `render` runs under mocks, too)."""
    platform = TrainingPlatform("platform", plan)
    pulumi.export("versions", platform.versions)
    pulumi.export("namespaces", platform.namespaces)
    pulumi.export("kubernetesVersion", plan.outputs["kubernetesVersion"])
    return platform


def deploy_part(validated: Validated, plan: Plan, stack: str) -> TrainingPlatform | None:
    """With `teamShards`: the platform stack's part, or one shard's, which first reads the platform stack's
    outputs (a StackReference: the platform must have been deployed, with the same shard count)."""
    cfg = validated.config
    count = cfg.team_shards
    part = select(plan, cfg.teams, count, stack)
    parsed = parse_shard_stack(stack)
    if parsed is None:
        platform = deploy(part)
        pulumi.export("teamShards", {"count": count, "stacks": layout(stack, count, cfg.teams).stacks()[1:]})
        return platform
    name, index = parsed
    reference = pulumi.StackReference(f"{pulumi.get_organization()}/{pulumi.get_project()}/{name}")

    def same_count(shards: Any) -> int:
        found = shards.get("count") if isinstance(shards, dict) else None
        if found != count:  # RunError: the message alone, no traceback
            raise pulumi.RunError(
                f"stack {name} was deployed with teamShards {found}, this config says {count}: "
                f"run `pulumi up --stack {name}` first (platform first, then its team shards)"
            )
        return count

    pulumi.export("platformTeamShards", reference.get_output("teamShards").apply(same_count))
    pulumi.export("teams", list(layout(name, count, cfg.teams).teams[index]))
    deploy_team_shard(part)
    return None


def run() -> TrainingPlatform | Fleet | None:
    trim_stack_traces()
    raw = _raw()
    stack = pulumi.get_stack()
    if "teamShards" not in raw:  # a shard stack run on its own (empty) config: say how to run it
        check_stack(stack, 0, f"stack {stack}")
    if is_fleet(raw):
        fleet = validate_fleet(raw, f"stack {pulumi.get_stack()}", _secret_keys(raw))
        for warning in fleet.warnings:
            pulumi.log.warn(warning)
        return deploy_fleet(build_fleet(fleet))  # every plan is built (and checked) before anything registers
    validated = load_from_pulumi()
    for warning in validated.warnings:
        pulumi.log.warn(warning)
    check_stack(stack, validated.config.team_shards, f"stack {stack}")
    plan = build_plan(validated)
    return deploy_part(validated, plan, stack) if validated.config.team_shards else deploy(plan)
