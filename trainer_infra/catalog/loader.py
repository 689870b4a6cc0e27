"""Load `runtimes/*.yaml` into a Catalog (catalog/entry.py): every file checked, every problem of every file
at once, as `<file>:<path>` issues.

Files starting with `_` are not runtimes (`_catalog.yaml` holds the catalog version). A runtime file is
`<name>.yaml` or, to keep an older version beside the current one, `<name>@<version>.yaml`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version
from pydantic import ValidationError

from trainer_infra.catalog import model as m
from trainer_infra.catalog.entry import PLACEHOLDER, Catalog, CatalogEntry
from trainer_infra.catalog.fault_tolerance import ttl_problems
from trainer_infra.catalog.webhook import runtime_findings
from trainer_infra.core.errors import ConfigError, ConfigIssue, did_you_mean, format_path
from trainer_infra.core.schema import keys_of, model_at
from trainer_infra.manifests.pod_rules import pod_spec_problems
from trainer_infra.manifests.pod_walk import containers, not_containers
from trainer_infra.manifests.runtime import (
    ANCESTOR_LABEL,
    FRAMEWORK_LABEL,
    image_problem,
    image_refs,
    pod_specs,
)
from trainer_infra.versions import MATRIX

ENV = "TRAINER_PLATFORM_RUNTIMES"
DEFAULT_DIR = Path(__file__).resolve().parents[2] / "runtimes"
SEMVER = re.compile(r"^\d+\.\d+\.\d+$")
FRAMEWORKS_HINT = "the SDK lists runtimes by it, e.g. torch, deepspeed, mlx, jax, xgboost, torchtune"


def runtimes_dir() -> Path:
    configured = os.environ.get(ENV)
    return Path(configured) if configured else DEFAULT_DIR


def _pydantic_issues(file: str, exc: ValidationError) -> list[ConfigIssue]:
    issues = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        path = f"{file}:{format_path(loc)}"
        if err["type"] == "extra_forbidden":
            parent = model_at(m.RuntimeFile, loc[:-1])
            hint = did_you_mean(str(loc[-1]), keys_of(parent)) if parent else None
            issues.append(ConfigIssue(path, f"unknown field '{loc[-1]}'", None, hint))
        elif err["type"] == "missing":
            issues.append(ConfigIssue(path, "required field is missing"))
        else:
            message = err["msg"].removeprefix("Value error, ")
            found = None if isinstance(err.get("input"), dict) else repr(err.get("input"))
            issues.append(ConfigIssue(path, message, found))
    return issues


def _metadata_issues(file: str, rt: m.RuntimeFile, stem: str) -> list[ConfigIssue]:
    md = rt.metadata
    issues = []
    if FRAMEWORK_LABEL not in md.labels:
        issues.append(ConfigIssue(f"{file}:metadata.labels", f"missing label {FRAMEWORK_LABEL}", None, FRAMEWORKS_HINT))
    support = md.labels.get(m.SUPPORT_LABEL)
    if support is not None and support != m.DEPRECATED:
        path = f"{file}:metadata.labels.{m.SUPPORT_LABEL}"
        issues.append(ConfigIssue(path, f"only '{m.DEPRECATED}' is defined upstream", support))
    for key in sorted(k for k in md.annotations if k.startswith(f"{m.DOMAIN}/") and k not in m.CATALOG_ANNOTATIONS):
        hint = did_you_mean(key, m.CATALOG_ANNOTATIONS) or "known: " + ", ".join(m.CATALOG_ANNOTATIONS)
        issues.append(ConfigIssue(f"{file}:metadata.annotations.{key}", "unknown catalog annotation", None, hint))
    version = md.annotations.get(m.RUNTIME_VERSION)
    path = f"{file}:metadata.annotations.{m.RUNTIME_VERSION}"
    if version is None:
        issues.append(
            ConfigIssue(path, "required annotation is missing", None, "the runtime's own version, e.g. 1.0.0")
        )
    elif not SEMVER.match(version):
        issues.append(ConfigIssue(path, "expected MAJOR.MINOR.PATCH", version))
    specifier = md.annotations.get(m.TRAINER_VERSIONS)
    path = f"{file}:metadata.annotations.{m.TRAINER_VERSIONS}"
    if specifier is None:
        hint = 'the Trainer versions it targets, e.g. ">=2.2.0,<2.4.0"'
        issues.append(ConfigIssue(path, "required annotation is missing", None, hint))
    else:
        try:
            SpecifierSet(specifier)
        except InvalidSpecifier:
            issues.append(ConfigIssue(path, "expected a PEP 440 version specifier", specifier, 'e.g. ">=2.2.0,<2.4.0"'))
    for feature in (f.strip() for f in md.annotations.get(m.REQUIRES, "").split(",") if f.strip()):
        if feature not in m.FEATURES:
            path = f"{file}:metadata.annotations.{m.REQUIRES}"
            issues.append(ConfigIssue(path, "unknown feature", feature, "known: " + ", ".join(m.FEATURES)))
    allowed = {md.name, f"{md.name}@{version}"}
    if stem not in allowed:
        hint = f"name the file {md.name}.yaml (or {md.name}@<version>.yaml for an older version kept beside it)"
        issues.append(ConfigIssue(f"{file}:metadata.name", "does not match the file name", md.name, hint))
    return issues


def _spec_issues(file: str, rt: m.RuntimeFile, raw: dict[str, Any]) -> list[ConfigIssue]:
    issues = []
    for pod_path, pod in pod_specs(raw):
        listed = list(containers(pod))
        if not any(key.startswith("containers") for key, _ in listed):
            issues.append(ConfigIssue(f"{file}:{pod_path}.containers", "a pod needs at least one container"))
        for key in not_containers(pod):
            issues.append(ConfigIssue(f"{file}:{pod_path}.{key}", "a container is a mapping (name, image, ...)"))
        for key, c in listed:
            if not isinstance(c.get("name"), str):
                issues.append(ConfigIssue(f"{file}:{pod_path}.{key}.name", "a container needs a name"))
                continue
            if not isinstance(c.get("image"), str):
                issues.append(ConfigIssue(f"{file}:{pod_path}.{key}.image", "a container needs an image"))
            for rel, image in image_refs(c):
                resolved = image.replace(PLACEHOLDER, "0.0.0")
                problem = (
                    "unknown placeholder (only ${TRAINER_VERSION})" if "${" in resolved else image_problem(resolved)
                )
                if problem:
                    issues.append(ConfigIssue(f"{file}:{pod_path}.{key}.{rel}", problem, image))
        for problem in pod_spec_problems(pod):
            hint = (
                "runtimes run in team namespaces: no host access, privileges or priority classes (use Kueue's priority)"
            )
            issues.append(ConfigIssue(f"{file}:{pod_path}", problem, None, hint))
    jobs = rt.spec.template.spec.replicated_jobs
    if not any(j.template.ancestor == "trainer" for j in jobs):
        hint = f"label the job that runs training with {ANCESTOR_LABEL}: trainer (on the Job template metadata)"
        issues.append(ConfigIssue(f"{file}:spec.template.spec.replicatedJobs", "no trainer job", None, hint))
    initializer_volume = "data-cache" not in [r.strip() for r in rt.metadata.annotations.get(m.REQUIRES, "").split(",")]
    issues += [ConfigIssue(f"{file}:{p}", msg) for p, msg in runtime_findings(raw, initializer_volume)]
    issues += [ConfigIssue(f"{file}:{p}", msg) for p, msg in ttl_problems(raw)]
    return issues


# Fields that exist only from a Trainer version on (v1alpha1 API of that tag): (path, minimum, present?).
SINCE: tuple[tuple[str, str, Any], ...] = (
    (
        "spec.mlPolicy.torch.envInjection",
        "2.3.0",
        lambda rt: rt.spec.ml_policy.torch and rt.spec.ml_policy.torch.env_injection,
    ),
)


def _version_issues(file: str, rt: m.RuntimeFile) -> list[ConfigIssue]:
    """A field newer than a Trainer release the file claims to support would be dropped by that release."""
    spec = SpecifierSet(rt.metadata.annotations[m.TRAINER_VERSIONS])
    issues = []
    for path, since, present in SINCE:
        older = [v for v in MATRIX.components["trainer"].versions if v in spec and Version(v) < Version(since)]
        if present(rt) and older:
            hint = f"narrow {m.TRAINER_VERSIONS} to >={since} or drop the field"
            issues.append(
                ConfigIssue(f"{file}:{path}", f"needs Trainer >= {since}, file targets {', '.join(older)}", None, hint)
            )
    return issues


def _load_file(path: Path, shown: str) -> tuple[CatalogEntry | None, list[ConfigIssue]]:
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        return None, [ConfigIssue(shown, f"not valid YAML: {exc}")]
    if not isinstance(raw, dict):
        return None, [ConfigIssue(shown, "expected a ClusterTrainingRuntime mapping")]
    try:
        rt = m.RuntimeFile.model_validate(raw)
    except ValidationError as exc:
        return None, _pydantic_issues(shown, exc)
    issues = _metadata_issues(shown, rt, path.name.removesuffix(".yaml")) + _spec_issues(shown, rt, raw)
    if not issues:
        issues = _version_issues(shown, rt)
    return (None if issues else CatalogEntry(shown, rt, raw)), issues


def load_catalog(directory: Path | None = None) -> Catalog:
    folder = directory or runtimes_dir()
    if not folder.is_dir():
        raise ConfigError([ConfigIssue(str(folder), "runtime catalog folder not found")], str(folder))
    issues: list[ConfigIssue] = []
    entries: list[CatalogEntry] = []
    seen: dict[tuple[str, str], str] = {}
    for path in sorted(folder.glob("*.yaml")):
        if path.name.startswith("_"):
            continue
        shown = f"{folder.name}/{path.name}"
        entry, found = _load_file(path, shown)
        issues += found
        if entry is None:
            continue
        key = (entry.name, entry.version)
        if key in seen:
            issues.append(
                ConfigIssue(
                    f"{shown}:metadata.name",
                    f"duplicate runtime {entry.name} {entry.version}",
                    None,
                    f"also defined in {seen[key]}; bump {m.RUNTIME_VERSION} or remove one",
                )
            )
            continue
        seen[key] = shown
        entries.append(entry)
    version = _catalog_version(folder, issues)
    if issues:
        raise ConfigError(issues, str(folder))
    return Catalog(version, str(folder), tuple(entries))


def _catalog_version(folder: Path, issues: list[ConfigIssue]) -> str:
    meta = folder / "_catalog.yaml"
    data = yaml.safe_load(meta.read_text()) if meta.is_file() else None
    version = data.get("version") if isinstance(data, dict) else None
    if not (isinstance(version, str) and SEMVER.match(version)) or set(data or {}) != {"version"}:
        issues.append(
            ConfigIssue(f"{folder.name}/_catalog.yaml", "expected exactly `version: MAJOR.MINOR.PATCH`", repr(data))
        )
        return "0.0.0"
    return version
