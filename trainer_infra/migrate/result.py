"""What converting one v1 job reports: the result model (status, findings, errors) and `Conversion`, the
document being converted that every step of the conversion reports into."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from trainer_infra.core.errors import format_path
from trainer_infra.migrate.mapping import Disposition
from trainer_infra.migrate.source import Document, InputError
from trainer_infra.migrate.target import Target

Path = tuple[str | int, ...]


class Status:
    CLEAN = "clean"  # converts with nothing lost
    ALLOWED = "lossy, allowed"  # converts; --allow-lossy named every reported field
    NEEDS_FLAG = "needs --allow-lossy"
    REFUSED = "refused"  # the tenancy rules refuse it
    CANNOT = "cannot"  # bad input, or nothing in the stack to run it


@dataclass(frozen=True)
class Finding:
    path: str
    disposition: Disposition
    message: str
    allowed: bool = False


@dataclass(frozen=True)
class Options:
    runtime: str | None = None
    queue: str | None = None
    priority: str | None = None
    allow_lossy: tuple[str, ...] = ()
    namespace: str | None = None  # for documents without one
    namespace_map: dict[str, str] = field(default_factory=dict)


@dataclass
class Result:
    doc: Document
    kind: str = ""
    namespace: str = ""
    name: str = ""
    runtime: str = ""
    reason: str = ""
    trainjob: dict[str, Any] | None = None
    findings: list[Finding] = field(default_factory=list)
    errors: list[InputError] = field(default_factory=list)
    refusal: str = ""

    @property
    def status(self) -> str:
        if self.errors:
            return Status.CANNOT
        if self.refusal:
            return Status.REFUSED
        lossy = [f for f in self.findings if f.disposition is Disposition.LOSSY]
        if any(not f.allowed for f in lossy):
            return Status.NEEDS_FLAG
        return Status.ALLOWED if lossy else Status.CLEAN

    def error(self, path: Path | str, message: str, hint: str = "") -> None:
        where = path if isinstance(path, str) else format_path(path)
        self.errors.append(InputError(self.doc.file, self.doc.index, self._prefix() + where, message, hint))

    def _prefix(self) -> str:
        return f"items[{self.doc.item}]." if self.doc.item is not None else ""


def allowed(name: str, path: str) -> bool:
    """`--allow-lossy` names a field by its path; `*` matches one segment, indices may be left out
    (`spec.*.Worker.template.spec.containers.envFrom`), and a prefix covers everything below it."""

    def segments(p: str) -> list[str]:
        return [s for s in re.sub(r"\[\d*\]", "", p).split(".") if s]

    want, have = segments(name), segments(path)
    return len(want) <= len(have) and all(w in ("*", h) for w, h in zip(want, have, strict=False))


@dataclass
class Conversion:
    """One document being converted: its input, the stack it targets, the options, and the Result every step
    reports into. `skip`: paths already reported as a whole, which the field walk does not enter."""

    doc: Document
    target: Target
    opts: Options
    result: Result = field(init=False)
    skip: set[Path] = field(default_factory=set)
    source_namespace: str = ""

    def __post_init__(self) -> None:
        self.result = Result(self.doc)

    @property
    def obj(self) -> dict[str, Any]:
        return self.doc.obj

    def lossy(self, path: Path, message: str) -> None:
        where = format_path(path)
        ok = any(allowed(n, where) for n in self.opts.allow_lossy)
        self.result.findings.append(Finding(where, Disposition.LOSSY, message, ok))

    def note(self, path: Path, disposition: Disposition, message: str) -> None:
        self.result.findings.append(Finding(format_path(path), disposition, message))
