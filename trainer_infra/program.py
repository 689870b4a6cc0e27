"""The Pulumi program: live config → validated model → plan → TrainingPlatform."""

from __future__ import annotations

import pulumi
from pulumi.runtime.config import CONFIG, get_config_env

from trainer_infra.config.loader import LoadedConfig, raw_from_pulumi_env, validate_config
from trainer_infra.plan.build import build_plan
from trainer_infra.platform.component import TrainingPlatform


def load_from_pulumi() -> LoadedConfig:
    # The language host hands config over with set_all_config; PULUMI_CONFIG is the older channel.
    everything = {**get_config_env(), **CONFIG.get()}
    return validate_config(raw_from_pulumi_env(everything), f"stack {pulumi.get_stack()}")


def run(loaded: LoadedConfig | None = None) -> TrainingPlatform:
    loaded = loaded or load_from_pulumi()
    for warning in loaded.warnings:
        pulumi.log.warn(warning)
    plan = build_plan(loaded.config)
    platform = TrainingPlatform("platform", loaded.config, plan)
    pulumi.export("versions", platform.versions)
    pulumi.export("namespaces", platform.namespaces)
    pulumi.export("kubernetesVersion", loaded.config.kubernetes.version)
    return platform
