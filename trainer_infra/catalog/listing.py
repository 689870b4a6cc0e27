"""`trainer-infra catalog list`: the catalog as a table, alone or as one stack serves it."""

from __future__ import annotations

from trainer_infra.catalog.entry import PLACEHOLDER, Catalog
from trainer_infra.catalog.plan import Selection, ServeContext, build_runtime
from trainer_infra.manifests.runtime import images_of

HEADER = ("NAME", "FRAMEWORK", "VERSION", "TRAINER", "STATUS", "IMAGES")


def _table(rows: list[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER) - 1)]
    lines = []
    for r in rows:
        cells = [c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)]
        lines.append("  ".join([*cells, r[-1]]).rstrip())
    return "\n".join(lines)


def catalog_rows(catalog: Catalog) -> list[tuple[str, ...]]:
    """Every version of every runtime, images as written (`${TRAINER_VERSION}` unresolved)."""
    rows: list[tuple[str, ...]] = []
    for name in catalog.names():
        for e in catalog.versions_of(name):
            status = "deprecated" if e.deprecated else "available"
            if e.requires:
                status += f" (needs {', '.join(e.requires)})"
            images = ", ".join(images_of(e.raw))
            rows.append((e.name, e.framework, e.version, str(e.trainer_versions), status, images))
    return rows


def stack_rows(ctx: ServeContext, catalog: Catalog, selection: Selection) -> list[tuple[str, ...]]:
    """What the stack serves (images after overrides and injections, e.g. the mirror), then what it skips."""
    rows: list[tuple[str, ...]] = []
    for s in selection.served:
        manifest = build_runtime(ctx, catalog, s)
        status = "enabled"
        if s.team:
            status += f" (team {s.team}, namespace {s.namespace})"
        if s.pinned:
            status += " (pinned version)"
        if s.entry.name in ctx.runtimes.retiring:
            status = "retiring (deprecated, unprotected)"
        elif s.entry.deprecated:
            status += ", deprecated"
        trainer = manifest["metadata"]["annotations"]["trainer-platform.io/trainer-api-version"]
        rows.append((s.name, s.entry.framework, s.entry.version, trainer, status, ", ".join(images_of(manifest))))
    for name, reason in sorted(selection.skipped.items()):
        e = catalog.versions_of(name)[0]
        rows.append((name, e.framework, e.version, "-", f"disabled: {reason}", "-"))
    return rows


def render_table(catalog: Catalog, ctx: ServeContext | None = None, selection: Selection | None = None) -> str:
    served = ctx is not None and selection is not None
    rows = stack_rows(ctx, catalog, selection) if ctx is not None and selection is not None else catalog_rows(catalog)
    head = f"catalog {catalog.version} ({catalog.directory})"
    if not served:
        head += f"; images show {PLACEHOLDER} where the selected Trainer version goes"
    return head + "\n" + _table([HEADER, *rows])
