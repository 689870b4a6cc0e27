"""The releases an upgrade e2e starts from: their controller binaries and their charts, from the Go modules.

``../shared/charts`` holds the charts of the matrix's defaults only. The release an upgrade starts from is made
here the way upstream's release makes it, from the sources the Go module proxy serves for that tag:

- its controller binary is built in a version set of its own (``VersionSet`` with that one component changed:
  its own cache folder); only the binaries that differ from the default set are built, the rest are not touched;
- its chart is packaged from the chart folder inside the module, as upstream's release script does (JobSet's,
  Kueue's and LWS's scripts set each image's ``repository`` (the promoted registry), ``tag`` and
  ``pullPolicy: IfNotPresent`` in values.yaml, then ``helm package --version <tag without v> --app-version <tag>``;
  Trainer's release workflow, ``.github/workflows/publish-helm-charts.yaml``, edits no value (its templates default
  the image tag to ``v<chart version>``) and runs ``helm dependency build`` then ``helm package --version``: its
  subcharts, JobSet and LWS at the versions its Chart.yaml names, are packaged from their own modules by their own
  recipe and vendored under ``charts/<name>/``, as unpacked folders the way ``../shared/charts`` holds them).

The chart sandbox publishes the image under the release's exact reference (``ChartSandbox(previous=...)``) and
the chart mirror serves the archive, so the real ``pulumi up`` installs the old release as a user's would.
"""

from __future__ import annotations

import fnmatch
import gzip
import io
import os
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from trainer_infra.sandbox.build import Builder
from trainer_infra.sandbox.controller_images import controller_images
from trainer_infra.sandbox.versions import VersionSet, module_dir

#: component → the release the upgrade e2e can install first (then one `pulumi up` per component to the matrix
#: default, in this order: docs/versions.md, "Upgrade runbook")
RELEASES = {"jobset": "0.11.1", "kueue": "0.18.3", "trainer": "2.2.0"}
#: the order of the steps (docs/versions.md, "Upgrade runbook"): each one's `pulumi up` keeps the later ones pinned
ORDER = ("jobset", "kueue", "trainer")
#: the Kueue step runs unless ``E2E_UPGRADE_KUEUE=0``. Its first run (2026-11-26, load 20 on 2 cores) refused a
#: valid TrainJob for 260 s while the 0.18.3 manager stopped answering; on an idle machine, with the CLI's
#: automatic logs off, nothing was refused (0 of 729 tries, 2026-11-27: docs/versions.md)
KUEUE_STEP = os.environ.get("E2E_UPGRADE_KUEUE", "1") != "0"
#: the releases this run installs first
START = {c: v for c, v in RELEASES.items() if c != "kueue" or KUEUE_STEP}


@dataclass(frozen=True)
class ModuleChart:
    """Where a component's chart sits in its Go module, and what its release script sets: ``images`` maps a values
    path (dotted) to an image name under ``registry`` (the promoted registry the script writes, ``k8s_registry`` in
    JobSet's, Kueue's and LWS's); ``app_version``: whether it packages with ``--app-version v<version>``."""

    module: str
    folder: str
    registry: str = ""
    images: tuple[tuple[str, str], ...] = ()
    app_version: bool = True

    def release_values(self, version: str) -> dict[str, Any]:
        """What the release script writes into values.yaml: each promoted image at the release tag."""
        values: dict[str, Any] = {}
        for path, name in self.images:
            *parents, leaf = path.split(".")
            node = values
            for key in parents:
                node = node.setdefault(key, {})
            node[leaf] = {"repository": f"{self.registry}/{name}", "tag": f"v{version}", "pullPolicy": "IfNotPresent"}
        return values


_JOBSET = ModuleChart("sigs.k8s.io/jobset", "charts/jobset", "registry.k8s.io/jobset", (("image", "jobset"),))
#: the components whose previous chart the e2e can package (JobSet's and Kueue's scripts:
#: hack/helm-chart-package.sh; Trainer's: .github/workflows/publish-helm-charts.yaml)
MODULE_CHARTS = {
    "jobset": _JOBSET,
    "kueue": ModuleChart(
        "sigs.k8s.io/kueue",
        "charts/kueue",
        "registry.k8s.io/kueue",
        (
            ("controllerManager.manager.image", "kueue"),
            ("kueueViz.backend.image", "kueueviz-backend"),
            ("kueueViz.frontend.image", "kueueviz-frontend"),
        ),
    ),
    "trainer": ModuleChart("github.com/kubeflow/trainer/v2", "charts/kubeflow-trainer", app_version=False),
}
#: chart dependency name → how its chart is packaged (LWS: hack/push-chart.sh)
SUBCHARTS = {
    "jobset": _JOBSET,
    "lws": ModuleChart("sigs.k8s.io/lws", "charts/lws", "registry.k8s.io/lws", (("image.manager", "lws"),)),
}


def start_versions(base: VersionSet) -> VersionSet:
    """The version set the upgrade starts from: ``base`` with ``START``'s releases."""
    return replace(base, **START)


def prepare(base: VersionSet) -> dict[str, float]:
    """Download the start releases' modules (their charts and subcharts) and build the controller binaries of the
    start set that differ from ``base`` (only those); the seconds each build took. Needs the module proxy unless
    cached."""
    for component, version in START.items():
        chart_modules(component, version)
    start = start_versions(base)
    ours = {(i.binary, i.version) for i in controller_images(base)}
    differ = {i.binary for i in controller_images(start) if (i.binary, i.version) not in ours}
    return Builder(start).build(only=differ) if differ else {}


def chart_modules(component: str, version: str) -> list[tuple[str, str]]:
    """The Go modules (module, version) the component's chart at ``version`` is packaged from: its own, then its
    subcharts' (each downloaded if missing)."""
    spec = MODULE_CHARTS[component]
    found = [(spec.module, version)]
    for name, sub_version in chart_dependencies(module_dir(spec.module, version) / spec.folder):
        found.append((SUBCHARTS[name].module, sub_version))
        module_dir(SUBCHARTS[name].module, sub_version)
    return found


def chart_archive(component: str, version: str, out: Path) -> Path:
    """``<chart>-<version>.tgz`` in ``out``, packaged from the module at ``v<version>`` as its release does."""
    name, files = _chart_files(MODULE_CHARTS[component], version)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for relative, data in files:
            info = tarfile.TarInfo(f"{name}/{relative}")
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    out.mkdir(parents=True, exist_ok=True)
    archive = out / f"{name}-{version}.tgz"
    archive.write_bytes(gzip.compress(buffer.getvalue(), mtime=0))
    return archive


def chart_dependencies(folder: Path) -> list[tuple[str, str]]:
    """(name, version) of each dependency the chart's Chart.yaml lists."""
    chart = yaml.safe_load((folder / "Chart.yaml").read_text())
    return [(d["name"], str(d["version"])) for d in chart.get("dependencies") or []]


def _chart_files(spec: ModuleChart, version: str) -> tuple[str, list[tuple[str, bytes]]]:
    """The chart's name and its files (path inside the chart, content) as its release packages them: Chart.yaml
    at ``version`` (and ``appVersion``), values.yaml with the release's images, what .helmignore lists left out,
    and each dependency's chart, packaged by its own recipe, under ``charts/<name>/``."""
    folder = module_dir(spec.module, version) / spec.folder
    chart = yaml.safe_load((folder / "Chart.yaml").read_text())
    chart["version"] = version
    if spec.app_version:
        chart["appVersion"] = f"v{version}"
    values = _merged(yaml.safe_load((folder / "values.yaml").read_text()), spec.release_values(version))
    replaced = {"Chart.yaml": _yaml(chart), "values.yaml": _yaml(values)}
    ignored = _helmignore(folder)
    files = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        relative = path.relative_to(folder).as_posix()
        if not ignored(relative):
            files.append((relative, replaced.get(relative, path.read_bytes())))
    for name, sub_version in chart_dependencies(folder):
        sub_name, sub_files = _chart_files(SUBCHARTS[name], sub_version)
        files += [(f"charts/{sub_name}/{relative}", data) for relative, data in sub_files]
    return chart["name"], files


def _merged(values: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    """``values`` with ``fields`` set (as ``yq e '.a.b.c = …'`` does: the other keys stay)."""
    out = dict(values)
    for key, value in fields.items():
        out[key] = _merged(out.get(key) or {}, value) if isinstance(value, dict) else value
    return out


def _yaml(doc: Any) -> bytes:
    return yaml.safe_dump(doc, sort_keys=False).encode()


def _helmignore(folder: Path) -> Callable[[str], bool]:
    """A matcher for ``.helmignore``'s patterns as Helm reads them: ``name/`` a folder, a pattern with a ``/``
    (Kueue's ``tests/*``) a glob on the path from the chart's root, else a glob on any path element (enough for
    the charts' own files; Helm's full rules also allow ``**`` and negation)."""
    source = folder / ".helmignore"
    lines = source.read_text().splitlines() if source.exists() else []
    patterns = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]

    def ignored(relative: str) -> bool:
        parts = relative.split("/")
        for pattern in patterns:
            if pattern.endswith("/"):
                if any(fnmatch.fnmatch(p, pattern.rstrip("/")) for p in parts[:-1]):
                    return True
            elif "/" in pattern:
                depth = pattern.count("/") + 1
                if len(parts) >= depth and fnmatch.fnmatch("/".join(parts[:depth]), pattern):
                    return True
            elif any(fnmatch.fnmatch(p, pattern) for p in parts):
                return True
        return False

    return ignored
