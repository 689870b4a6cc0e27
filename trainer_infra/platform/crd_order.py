"""Helm post-renderer: every workload of a chart waits for every CRD of that chart.

Chart v4 registers its objects in the order of cli-utils' dependency graph (CRD → its custom resources,
Namespace → namespaced objects, `config.kubernetes.io/depends-on`); a Deployment gets no edge to the CRDs,
so on a first install the controllers start before their CRDs exist: Trainer 2.2 crash-loops
("unable to retrieve the complete list of server APIs"), LWS 0.8 exits on its cache-sync timeout. This adds
the `depends-on` annotation, naming every CRD the chart renders (crds/ of the chart and its subcharts, and
CRDs in templates/), to every Deployment, StatefulSet and DaemonSet, before Chart v4 builds the graph.

It runs as `python3 -c <this file>` with the standard library only: the provider runs it, not the program's
environment, and nothing of this machine lands in the chart's inputs. Helm prints block-style YAML, one
document per template; this edits lines and fails loudly on a layout it does not know.
"""

from __future__ import annotations

import re
import sys

ANNOTATION = "config.kubernetes.io/depends-on"
WORKLOADS = ("Deployment", "StatefulSet", "DaemonSet")
_SEPARATOR = re.compile(r"^---\s*(#.*)?$")
_TOP = re.compile(r"^([A-Za-z]+):\s*(.*?)\s*$")


def _scalar(text: str) -> str:
    text = text.split(" #", 1)[0].strip()
    return text[1:-1] if len(text) > 1 and text[0] == text[-1] and text[0] in "'\"" else text


def _documents(text: str) -> list[list[str]]:
    docs: list[list[str]] = [[]]
    for line in text.split("\n"):
        if _SEPARATOR.match(line):
            docs.append([line])
        else:
            docs[-1].append(line)
    return docs


def _top(doc: list[str], key: str) -> tuple[int, str] | None:
    """A top-level key: (its line, what follows the colon)."""
    for i, line in enumerate(doc):
        if (m := _TOP.match(line)) and m.group(1) == key:
            return i, m.group(2)
    return None


def _metadata(doc: list[str]) -> tuple[int, int, str]:
    """(the `metadata:` line, the end of its block, the indent of its keys)."""
    found = _top(doc, "metadata")
    if found is None or found[1]:
        raise ValueError("no block-style metadata")
    start = found[0]
    end, indent = start + 1, ""
    while end < len(doc) and (not doc[end].strip() or doc[end].startswith((" ", "#"))):
        if not indent and doc[end].strip() and not doc[end].lstrip().startswith("#"):
            indent = doc[end][: len(doc[end]) - len(doc[end].lstrip())]
        end += 1
    if not indent:
        raise ValueError("empty metadata")
    return start, end, indent


def _field(doc: list[str], key: str) -> tuple[int, str] | None:
    """A key directly under `metadata`: (its line, what follows the colon)."""
    start, end, indent = _metadata(doc)
    pattern = re.compile(rf"^{indent}{key}:(.*)$")
    for i in range(start + 1, end):
        if m := pattern.match(doc[i]):
            return i, m.group(1).strip()
    return None


def _kind(doc: list[str]) -> str:
    found = _top(doc, "kind")
    return _scalar(found[1]) if found else ""


def _name(doc: list[str]) -> str:
    found = _field(doc, "name")
    if found is None:
        raise ValueError("no metadata.name")
    return _scalar(found[1])


def _annotate(doc: list[str], value: str) -> None:
    start, _, indent = _metadata(doc)
    line = f'{ANNOTATION}: "{value}"'
    if any(ANNOTATION in other for other in doc):
        raise ValueError(f"it has its own {ANNOTATION}")
    found = _field(doc, "annotations")
    if found is None:
        doc[start + 1 : start + 1] = [f"{indent}annotations:", f"{indent}{indent}{line}"]
        return
    at, rest = found
    if rest in ("{}", "{ }"):
        doc[at : at + 1] = [f"{indent}annotations:", f"{indent}{indent}{line}"]
        return
    if rest and not rest.startswith("#"):
        raise ValueError(f"flow-style annotations ({rest!r})")
    child = next((d for d in doc[at + 1 :] if d.strip() and not d.lstrip().startswith("#")), "")
    child_indent = child[: len(child) - len(child.lstrip())]
    if len(child_indent) <= len(indent):
        raise ValueError("empty annotations")
    doc.insert(at + 1, f"{child_indent}{line}")


def order_after_crds(manifest: str) -> str:
    """`manifest` (Helm's output) with every workload annotated to depend on every CRD in it."""
    docs = _documents(manifest)
    crds = sorted({_name(d) for d in docs if _kind(d) == "CustomResourceDefinition"})
    if not crds:
        return manifest
    value = ",".join(f"apiextensions.k8s.io/CustomResourceDefinition/{name}" for name in crds)
    for doc in docs:
        kind = _kind(doc)
        if kind in WORKLOADS:
            try:
                _annotate(doc, value)
            except ValueError as exc:
                raise ValueError(f"cannot order {kind} {_name(doc)} after the chart's CRDs: {exc}") from None
    return "\n".join("\n".join(doc) for doc in docs)


def main() -> int:
    try:
        sys.stdout.write(order_after_crds(sys.stdin.read()))
    except ValueError as exc:
        print(f"trainer-platform post-renderer: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
