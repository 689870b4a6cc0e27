"""Read a stack file strictly and with bounded work, before any model sees it.

PyYAML (already a dependency, with libyaml's C parser when present) does the parsing; this module adds
what a hostile or careless file needs and a plain `yaml.safe_load` does not give:
- limits checked while streaming parser events, before anything is built: file size, nesting depth,
  and the node count *after* alias expansion (a 1 KB alias bomb would otherwise build a 24 MB value);
- duplicate keys are errors with both line numbers (YAML keeps the last one silently: a whole team
  vanishes), with the config path of the mapping;
- strict UTF-8 (a BOM is fine), one document, a mapping at the top;
- the scalars the Pulumi CLI (Go yaml.v3, YAML 1.2) reads differently from PyYAML (YAML 1.1) are read
  as it does: dates stay strings, only true/false are booleans; tags that have no JSON form
  (!!binary, !!set, !!omap, !!pairs, !!timestamp) and .inf/.nan are refused with their path.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import yaml

from trainer_infra.core.errors import ConfigError, ConfigIssue

MAX_BYTES = 1024 * 1024  # a stack of 1000 teams is ~300 KB
MAX_NODES = 200_000  # YAML nodes after alias expansion
MAX_DEPTH = 64  # nested mappings/sequences

_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_BOOL = "tag:yaml.org,2002:bool"
_FORBIDDEN_TAGS = {f"tag:yaml.org,2002:{t}": t for t in ("binary", "set", "omap", "pairs", "timestamp")}
_BOOL_12 = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")


class _Loader(_Base):  # type: ignore[misc]
    """SafeLoader with YAML 1.2 booleans and no implicit timestamps (as the Pulumi CLI reads the file)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag not in (_TIMESTAMP, _BOOL)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(_BOOL, _BOOL_12, list("tTfF"))


def _where(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "somewhere"


def _path(stack: list[Any]) -> str:
    out = ""
    for frame in stack:
        key = frame.get("key")
        if frame["kind"] == "seq":
            out += f"[{frame['index']}]"
        elif key is not None:
            out += ("." if out else "") + str(key)
    return out


def _scan(text: str) -> list[ConfigIssue]:
    """One pass over parser events, before anything is built: limits, duplicate keys, unsupported tags."""
    issues: list[ConfigIssue] = []
    stack: list[dict[str, Any]] = []  # open collections: kind, keys seen, key expected next, current key/index
    sizes: list[int] = []  # expanded node count of each open collection so far
    anchors: dict[str, int] = {}  # anchor → expanded node count of its node
    total = 0
    documents = 0

    def count(n: int) -> None:
        nonlocal total
        total += n
        if sizes:
            sizes[-1] += n

    for event in yaml.parse(text, Loader=_Base):
        if isinstance(event, yaml.DocumentStartEvent):
            documents += 1
            if documents > 1:
                hint = "a stack file holds exactly one document: remove the `---`"
                return [ConfigIssue("", f"{_where(event.start_mark)}: a second YAML document", None, hint)]
            continue
        if isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            frame, size = stack.pop(), sizes.pop()
            if frame["anchor"]:
                anchors[frame["anchor"]] = size + 1
            if sizes:
                sizes[-1] += size
            continue
        if not isinstance(event, yaml.NodeEvent):
            continue
        is_key = False
        if stack:
            top = stack[-1]
            if top["kind"] == "seq":
                top["index"] += 1
            else:
                is_key = top["expect_key"]
                top["expect_key"] = not is_key
        tag = getattr(event, "tag", None) or ""
        if tag in _FORBIDDEN_TAGS or tag.startswith("tag:yaml.org,2002:python/"):
            name = _FORBIDDEN_TAGS.get(tag, tag.removeprefix("tag:yaml.org,2002:"))
            hint = "write it as a plain string, number, boolean, list or mapping"
            issues.append(
                ConfigIssue(_path(stack), f"{_where(event.start_mark)}: YAML tag !!{name} is not supported", None, hint)
            )
        if isinstance(event, yaml.AliasEvent):
            count(anchors.get(event.anchor or "", 1))
        elif isinstance(event, yaml.ScalarEvent):
            count(1)
            if event.anchor:
                anchors[event.anchor] = 1
            if is_key:
                top = stack[-1]
                if event.value == "<<" and event.implicit[0]:
                    top["key"] = "<<"  # a merge key, not a duplicate
                elif event.value in top["seen"]:
                    where = _path(stack[:-1])
                    issues.append(
                        ConfigIssue(
                            f"{where}.{event.value}" if where else event.value,
                            f"{_where(event.start_mark)}: duplicate key (first at line {top['seen'][event.value]})",
                            None,
                            "YAML keeps only the last one: merge the two into one",
                        )
                    )
                else:
                    top["seen"][event.value] = event.start_mark.line + 1 if event.start_mark else 0
                top["key"] = event.value
        else:  # a mapping or sequence opens
            if len(stack) >= MAX_DEPTH:
                message = f"{_where(event.start_mark)}: nested deeper than {MAX_DEPTH} levels"
                return [*issues, ConfigIssue(_path(stack), message, None, "stack config is never that deep")]
            kind = "map" if isinstance(event, yaml.MappingStartEvent) else "seq"
            stack.append(
                {"kind": kind, "seen": {}, "expect_key": True, "key": None, "index": -1, "anchor": event.anchor}
            )
            count(1)
            sizes.append(0)
        if total > MAX_NODES:
            hint = "is an alias (*name) repeated many times? write the values out"
            return [
                *issues,
                ConfigIssue(_path(stack), f"more than {MAX_NODES} YAML nodes (aliases expanded)", None, hint),
            ]
    return issues


def _plain(value: Any, path: str, issues: list[ConfigIssue]) -> None:
    """Refuse values that have no JSON form (the Pulumi CLI hands the program JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        issues.append(ConfigIssue(path, "expected a finite number", str(value), "quote it if you mean a string"))
    elif isinstance(value, dict):
        for k, v in value.items():
            _plain(v, f"{path}.{k}" if path else str(k), issues)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _plain(v, f"{path}[{i}]", issues)


def parse(text: str, source: str) -> Any:
    """YAML text → plain data (dict/list/str/int/float/bool/None), or a ConfigError naming every problem."""
    try:
        issues = _scan(text)
        if issues:
            raise ConfigError(issues, source)
        data = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise ConfigError([ConfigIssue("", f"not valid YAML: {exc}")], source) from None
    issues = []
    _plain(data, "", issues)
    if issues:
        raise ConfigError(issues, source)
    return data


def read(path: Path) -> Any:
    """A stack file → plain data. Refuses before parsing: a missing or oversized file, non-UTF-8 bytes."""
    source = str(path)
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise ConfigError(
                [
                    ConfigIssue(
                        "",
                        f"the file has {size} bytes, more than the limit of {MAX_BYTES}",
                        None,
                        "a stack file is config, not data",
                    )
                ],
                source,
            )
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError([ConfigIssue("", f"no such stack file {path}")], source) from None
    except IsADirectoryError:
        raise ConfigError([ConfigIssue("", f"{path} is a directory, not a stack file")], source) from None
    except OSError as exc:
        raise ConfigError([ConfigIssue("", f"cannot read {path}: {exc.strerror}")], source) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        found = raw[exc.start : exc.start + 1].hex()
        raise ConfigError(
            [
                ConfigIssue(
                    "", f"line {line}, column {column}: not UTF-8 (byte 0x{found})", None, "save the file as UTF-8"
                )
            ],
            source,
        ) from None
    return parse(text, source)
