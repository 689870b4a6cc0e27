"""Read a stack config's raw values: a Pulumi stack file offline, or the live Pulumi config. What they
mean is stack/validate.py's job."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainer_infra.core.errors import ConfigError, ConfigIssue, did_you_mean
from trainer_infra.core.schema import short
from trainer_infra.stack.file import read as stack_file_data

NAMESPACE = "trainer-platform"
SECRET_PLACEHOLDER = "<secret>"


def _replace_secure(value: Any) -> Any:
    """Offline we cannot decrypt `{secure: ...}` values: keep a placeholder that renders as a secret."""
    if isinstance(value, dict):
        if set(value) == {"secure"}:
            return SECRET_PLACEHOLDER
        return {k: _replace_secure(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_secure(v) for v in value]
    return value


def raw_from_stack_document(doc: Any, source: str) -> dict[str, Any]:
    """`config: {trainer-platform:kubernetes: …}` → `{kubernetes: …}`; raises on namespace mistakes."""
    raw, issues = read_stack_document(doc, source)
    if issues:
        raise ConfigError(issues, source)
    return raw


def read_stack_document(doc: Any, source: str) -> tuple[dict[str, Any], list[ConfigIssue]]:
    """Our keys, and issues for keys that look meant for us; other namespaces are not ours."""
    if not isinstance(doc, dict) or not isinstance(doc.get("config", {}), dict):
        raise ConfigError([ConfigIssue("config", "expected a mapping under 'config:'", short(doc))], source)
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


def read_file(path: Path) -> tuple[dict[str, Any], list[ConfigIssue]]:
    """A stack file's raw config, and issues for keys that look meant for us. The file is read strictly
    and with bounded work (stack/file.py); its issue paths are config paths (`teams[0]`)."""
    try:
        doc = stack_file_data(path)
    except ConfigError as exc:
        raise ConfigError([_config_path(i) for i in exc.issues], exc.source) from None
    return read_stack_document(doc, str(path))


def _config_path(issue: ConfigIssue) -> ConfigIssue:
    """`config.trainer-platform:teams[0].name` (a file position) → `teams[0].name` (a config path)."""
    path = issue.path.removeprefix(f"config.{NAMESPACE}:")
    return ConfigIssue(path, issue.message, issue.found, issue.hint)


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
