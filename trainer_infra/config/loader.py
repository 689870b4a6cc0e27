"""Read a stack config (a Pulumi stack file offline, or the live Pulumi config) into a StackConfig.

All problems come back at once as a ConfigError with paths like `components.kueue.version`; the
compatibility matrix runs after the shape is valid.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from trainer_infra.config.stack import StackConfig
from trainer_infra.config.types import PATTERN_HELP
from trainer_infra.errors import ConfigError, ConfigIssue, did_you_mean, format_path
from trainer_infra.queues.checks import check as queue_issues
from trainer_infra.storage.checks import storage_issues
from trainer_infra.tenancy.checks import tenancy_issues
from trainer_infra.versions import check_compatibility

NAMESPACE = "trainer-platform"
SECRET_PLACEHOLDER = "<secret>"


@dataclass(frozen=True)
class LoadedConfig:
    config: StackConfig
    warnings: list[str] = field(default_factory=list)


def model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model class that owns the key at `loc`, so a typo can be matched against its real keys."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        by_alias = {f.alias or n: f for n, f in current.model_fields.items()}
        fld = by_alias.get(part)
        if fld is None:
            return None
        current = _unwrap(fld.annotation)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(annotation: Any) -> Any:
    """Optional[X], list[X], dict[str, X], Annotated[X, ...] → X."""
    while True:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        origin = typing.get_origin(annotation)
        if origin is None or not args:
            return annotation
        annotation = args[-1] if origin in (dict, Mapping) else args[0]


def keys_of(model: type[BaseModel]) -> list[str]:
    return [f.alias or n for n, f in model.model_fields.items()]


def _issue_from(err: Mapping[str, Any]) -> ConfigIssue:
    loc = tuple(err["loc"])
    path = format_path(loc)
    kind = err["type"]
    found = None if kind == "missing" else _short(err.get("input"))
    if kind == "extra_forbidden":
        parent = model_at(StackConfig, loc[:-1])
        hint = did_you_mean(str(loc[-1]), keys_of(parent)) if parent else None
        if hint is None and parent is not None:
            hint = "allowed keys: " + ", ".join(keys_of(parent))
        return ConfigIssue(path, f"unknown key '{loc[-1]}'", None, hint)
    if kind == "missing":
        return ConfigIssue(path, "required key is missing", None, None)
    if kind == "string_pattern_mismatch":
        pattern = err.get("ctx", {}).get("pattern", "")
        what, hint = PATTERN_HELP.get(pattern, (f"a value matching {pattern}", None))
        return ConfigIssue(path, f"expected {what}", found, hint)
    message = str(err["msg"])
    if message.startswith("Value error, "):
        return ConfigIssue(path, message.removeprefix("Value error, "), found, None)
    return ConfigIssue(path, "expected " + message.removeprefix("Input should be "), found, None)


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def _replace_secure(value: Any) -> Any:
    """Offline we cannot decrypt `{secure: ...}` values: keep a placeholder that renders as a secret."""
    if isinstance(value, dict):
        if set(value) == {"secure"}:
            return SECRET_PLACEHOLDER
        return {k: _replace_secure(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_secure(v) for v in value]
    return value


def validate_config(raw: Mapping[str, Any], source: str = "", earlier: list[ConfigIssue] | None = None) -> LoadedConfig:
    """The single entry point: shape (pydantic), then the compatibility matrix. `earlier` issues
    (e.g. misspelt namespaces in the stack file) are reported together with these."""
    earlier = earlier or []
    try:
        cfg = StackConfig.model_validate(dict(raw))
    except ValidationError as exc:
        raise ConfigError(earlier + [_issue_from(e) for e in exc.errors()], source) from None
    # Cross-field checks, each area's own, all reported together with their exact paths.
    cross_field = [*queue_issues(cfg), *tenancy_issues(cfg), *storage_issues(cfg)]
    if earlier or cross_field:
        raise ConfigError(earlier + cross_field, source)
    versions = cfg.components.resolved_versions()
    findings = check_compatibility(
        versions,  # type: ignore[arg-type]
        cfg.kubernetes.version,
        cfg.components.kueue.train_job_integration,
    )
    issues = [ConfigIssue(f.path, f.message, None, f.hint) for f in findings]
    if issues and not cfg.allow_unsupported_versions:
        extra = "or set allowUnsupportedVersions: true to install anyway"
        raise ConfigError([ConfigIssue(i.path, i.message, i.found, f"{i.hint}; {extra}") for i in issues], source)
    warnings = [f"UNSUPPORTED (allowUnsupportedVersions): {i.render()}" for i in issues]
    return LoadedConfig(cfg, warnings)


def raw_from_stack_document(doc: Any, source: str) -> dict[str, Any]:
    """`config: {trainer-platform:kubernetes: …}` → `{kubernetes: …}`; raises on namespace mistakes."""
    raw, issues = read_stack_document(doc, source)
    if issues:
        raise ConfigError(issues, source)
    return raw


def read_stack_document(doc: Any, source: str) -> tuple[dict[str, Any], list[ConfigIssue]]:
    """Our keys, and issues for keys that look meant for us; other namespaces are not ours."""
    if not isinstance(doc, dict) or not isinstance(doc.get("config", {}), dict):
        raise ConfigError([ConfigIssue("config", "expected a mapping under 'config:'", _short(doc))], source)
    issues: list[ConfigIssue] = []
    raw: dict[str, Any] = {}
    for key, value in (doc.get("config") or {}).items():
        ns, sep, name = str(key).partition(":")
        if sep and ns == NAMESPACE:
            raw[name] = _replace_secure(value)
        elif not sep:
            issues.append(ConfigIssue(str(key), "config keys need a namespace", None, f"write '{NAMESPACE}:{key}'"))
        elif did_you_mean(ns, [NAMESPACE]):
            issues.append(
                ConfigIssue(str(key), f"unknown config namespace '{ns}'", None, f"did you mean '{NAMESPACE}'?")
            )
    return raw, issues


def load_file(path: Path) -> LoadedConfig:
    try:
        doc = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError([ConfigIssue("", f"no such stack file {path}")], str(path)) from None
    except yaml.YAMLError as exc:
        raise ConfigError([ConfigIssue("", f"not valid YAML: {exc}")], str(path)) from None
    raw, issues = read_stack_document(doc, str(path))
    return validate_config(raw, str(path), issues)


def stack_file(stack: str, stacks_dir: Path) -> Path:
    return stacks_dir / f"Pulumi.{stack}.yaml"


def raw_from_pulumi_env(env: Mapping[str, str]) -> dict[str, Any]:
    """Pulumi hands config to the program as `{"trainer-platform:key": "<json or string>"}`."""
    raw: dict[str, Any] = {}
    prefix = f"{NAMESPACE}:"
    for key, text in env.items():
        if not key.startswith(prefix):
            continue
        stripped = text.strip()
        value: Any = text
        if stripped[:1] in "{[" or stripped in ("true", "false"):
            try:
                value = json.loads(stripped)
            except json.JSONDecodeError:
                value = text
        raw[key[len(prefix) :]] = value
    return raw
