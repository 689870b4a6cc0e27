"""The Pulumi program: live config → validated stack → plan → TrainingPlatform."""

from __future__ import annotations

import pulumi
from pulumi.runtime.config import CONFIG, get_config_env

from trainer_infra.core.objects import Plan
from trainer_infra.platform.component import TrainingPlatform
from trainer_infra.stack.build import build_plan
from trainer_infra.stack.load import raw_from_pulumi_env
from trainer_infra.stack.validate import Validated, validate


def load_from_pulumi() -> Validated:
    # The language host hands config over with set_all_config; PULUMI_CONFIG is the older channel.
    everything = {**get_config_env(), **CONFIG.get()}
    return validate(raw_from_pulumi_env(everything), f"stack {pulumi.get_stack()}")


def deploy(plan: Plan) -> TrainingPlatform:
    """Register the plan's resources and the stack outputs (what `render` runs under mocks, too)."""
    platform = TrainingPlatform("platform", plan)
    pulumi.export("versions", platform.versions)
    pulumi.export("namespaces", platform.namespaces)
    pulumi.export("kubernetesVersion", plan.outputs["kubernetesVersion"])
    return platform


def run() -> TrainingPlatform:
    validated = load_from_pulumi()
    for warning in validated.warnings:
        pulumi.log.warn(warning)
    return deploy(build_plan(validated))
