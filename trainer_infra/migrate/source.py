"""Read v1 job manifests from files, a directory or stdin: multi-document YAML or JSON, `List` objects.

Input is hostile until proven otherwise: a file larger than MAX_BYTES or a document nested deeper than
MAX_DEPTH is refused before it is built into objects (the check runs on the parser's event stream, which is
iterative, so no input can exhaust the stack); a document whose YAML aliases expand to more than MAX_VALUES
values or deeper than MAX_DEPTH (a "billion laughs") is refused before anything walks it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

MAX_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 64
MAX_DOCUMENTS = 10_000
MAX_VALUES = 1_000_000
SUFFIXES = (".yaml", ".yml", ".json")
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class InputError:
    """Bad input, named by file, document index (0-based) and field path."""

    file: str
    document: int | None
    path: str
    message: str
    hint: str = ""

    def render(self) -> str:
        where = self.file + (f"[{self.document}]" if self.document is not None else "")
        text = f"{where}: {self.path + ': ' if self.path else ''}{self.message}"
        return text + (f"\n    hint: {self.hint}" if self.hint else "")


@dataclass(frozen=True)
class Document:
    """One object to migrate. `item` is set when it came from a List's `items`."""

    file: str
    index: int
    obj: dict[str, Any]
    item: int | None = None

    @property
    def where(self) -> str:
        return f"{self.file}[{self.index}]" + (f".items[{self.item}]" if self.item is not None else "")


class SourceError(Exception):
    def __init__(self, errors: list[InputError]) -> None:
        self.errors = errors
        super().__init__("\n".join(e.render() for e in errors))


def _check_events(text: str, name: str) -> None:
    """Refuse aliases and deep nesting before any object is constructed."""
    depth, document = 0, -1
    try:
        for event in yaml.parse(text, Loader=_Loader):
            if isinstance(event, yaml.DocumentStartEvent):
                document += 1
                if document >= MAX_DOCUMENTS:
                    raise SourceError([InputError(name, None, "", f"more than {MAX_DOCUMENTS} documents")])
            elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_DEPTH:
                    raise SourceError([InputError(name, document, "", f"nested deeper than {MAX_DEPTH} levels")])
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        raise SourceError([InputError(name, max(document, 0), "", f"not YAML or JSON{at}: {_problem(exc)}")]) from None


def _expanded_problem(obj: Any) -> str | None:
    """Walk the object as the converter will (aliases expanded), iteratively, with a budget."""
    stack: list[tuple[Any, int]] = [(obj, 0)]
    count = 0
    while stack:
        value, depth = stack.pop()
        count += 1
        if count > MAX_VALUES:
            return f"expands to more than {MAX_VALUES} values (YAML aliases)"
        if depth > MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} levels (YAML aliases)"
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
    return None


def _problem(exc: yaml.YAMLError) -> str:
    return str(getattr(exc, "problem", None) or exc).splitlines()[0]


def parse(text: str, name: str) -> list[Document]:
    """Every object in `text`; an empty document is skipped, a List contributes its items."""
    if len(text.encode()) > MAX_BYTES:
        raise SourceError([InputError(name, None, "", f"larger than {MAX_BYTES // (1024 * 1024)} MiB")])
    _check_events(text, name)
    docs: list[Document] = []
    errors: list[InputError] = []
    try:
        loaded = list(yaml.load_all(text, Loader=_Loader))
    except yaml.YAMLError as exc:
        raise SourceError([InputError(name, None, "", f"not YAML or JSON: {_problem(exc)}")]) from None
    for index, obj in enumerate(loaded):
        if obj is None:
            continue
        if not isinstance(obj, dict):
            errors.append(InputError(name, index, "", f"expected an object, found {type(obj).__name__}"))
            continue
        problem = _expanded_problem(obj)
        if problem:
            errors.append(InputError(name, index, "", problem))
            continue
        kind = str(obj.get("kind", ""))
        if kind == "List" or (kind.endswith("List") and "items" in obj):
            items = obj.get("items")
            if not isinstance(items, list):
                errors.append(InputError(name, index, "items", "expected a list"))
                continue
            for i, item in enumerate(items):
                if isinstance(item, dict):
                    docs.append(Document(name, index, item, i))
                else:
                    errors.append(InputError(name, index, f"items[{i}]", "expected an object"))
            continue
        docs.append(Document(name, index, obj))
    if errors:
        raise SourceError(errors)
    return docs


def _files(target: Path) -> Iterator[Path]:
    if target.is_dir():
        yield from sorted(p for p in target.rglob("*") if p.is_file() and p.suffix in SUFFIXES)
    else:
        yield target


def read(targets: list[str]) -> list[Document]:
    """Documents of every target (`-` is stdin), in order; all problems of all files at once."""
    docs: list[Document] = []
    errors: list[InputError] = []
    for target in targets:
        if target == "-":
            sources: list[tuple[str, str | None]] = [("<stdin>", sys.stdin.read(MAX_BYTES + 1))]
        elif not Path(target).exists():
            errors.append(InputError(target, None, "", "no such file or directory"))
            continue
        else:
            sources = []
            for path in _files(Path(target)):
                if path.stat().st_size > MAX_BYTES:
                    errors.append(InputError(str(path), None, "", f"larger than {MAX_BYTES // (1024 * 1024)} MiB"))
                    continue
                try:
                    sources.append((str(path), path.read_text(encoding="utf-8")))
                except UnicodeDecodeError:
                    errors.append(InputError(str(path), None, "", "not UTF-8 text"))
        for name, text in sources:
            try:
                docs.extend(parse(text or "", name))
            except SourceError as exc:
                errors.extend(exc.errors)
    if errors:
        raise SourceError(errors)
    return docs
