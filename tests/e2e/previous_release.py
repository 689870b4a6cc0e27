"""The releases an upgrade e2e starts from: their controller binaries and their charts, from the Go modules.

``../shared/charts`` holds the charts of the matrix's defaults only. The release an upgrade starts from is made
here the way upstream's release makes it, from the sources the Go module proxy serves for that tag:

- its controller binary is built in a version set of its own (``VersionSet`` with that one component changed:
  its own cache folder); only the binaries that differ from the default set are built, the rest are not touched;
- its chart is packaged from the chart folder inside the module, as upstream's release script does (JobSet:
  ``hack/helm-chart-package.sh`` sets ``image.repository``, ``image.tag`` and ``image.pullPolicy``, then
  ``helm package --version <tag without v> --app-version <tag>``).

The chart sandbox publishes the image under the release's exact reference (``ChartSandbox(previous=...)``) and
the chart mirror serves the archive, so the real ``pulumi up`` installs the old release as a user's would.
"""

from __future__ import annotations

import fnmatch
import gzip
import io
import tarfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.build import Builder
from tests.e2e.controller_images import controller_images
from trainer_infra.core.images import split_image
from trainer_infra.sandbox.versions import VersionSet, module_dir
from trainer_infra.versions import MATRIX

#: component → the release the upgrade e2e installs first (then `pulumi up` to the matrix default)
START = {"jobset": "0.11.1"}


@dataclass(frozen=True)
class ModuleChart:
    """Where a component's chart sits in its Go module, and which values its release script sets."""

    module: str
    folder: str

    def release_values(self, component: str, version: str) -> dict[str, dict[str, str]]:
        """What the release script writes into values.yaml: the promoted image at the release tag."""
        release = MATRIX.components[component].release(version)
        if release is None:
            raise ValueError(f"{component} {version} is not in the compatibility matrix")
        repository, tag = split_image(release.images["manager"])
        return {"image": {"repository": repository, "tag": tag, "pullPolicy": "IfNotPresent"}}


#: the components whose previous chart the e2e can package (JobSet's script: hack/helm-chart-package.sh)
MODULE_CHARTS = {"jobset": ModuleChart("sigs.k8s.io/jobset", "charts/jobset")}


def start_versions(base: VersionSet) -> VersionSet:
    """The version set the upgrade starts from: ``base`` with ``START``'s releases."""
    return replace(base, **START)


def prepare(base: VersionSet) -> dict[str, float]:
    """Download the start releases' modules (their charts) and build the controller binaries of the start set that
    differ from ``base`` (only those); the seconds each build took. Needs the module proxy unless cached."""
    for component, version in START.items():
        module_dir(MODULE_CHARTS[component].module, version)
    start = start_versions(base)
    ours = {(i.binary, i.version) for i in controller_images(base)}
    differ = {i.binary for i in controller_images(start) if (i.binary, i.version) not in ours}
    return Builder(start).build(only=differ) if differ else {}


def chart_archive(component: str, version: str, out: Path) -> Path:
    """``<chart>-<version>.tgz`` in ``out``, packaged from the module at ``v<version>`` as its release does."""
    spec = MODULE_CHARTS[component]
    folder = module_dir(spec.module, version) / spec.folder
    chart = yaml.safe_load((folder / "Chart.yaml").read_text())
    chart.update(version=version, appVersion=f"v{version}")
    values = yaml.safe_load((folder / "values.yaml").read_text())
    for key, fields in spec.release_values(component, version).items():
        values[key] = {**(values.get(key) or {}), **fields}
    replaced = {"Chart.yaml": _yaml(chart), "values.yaml": _yaml(values)}
    ignored = _helmignore(folder)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            relative = path.relative_to(folder).as_posix()
            if ignored(relative):
                continue
            data = replaced.get(relative, path.read_bytes())
            info = tarfile.TarInfo(f"{chart['name']}/{relative}")
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    out.mkdir(parents=True, exist_ok=True)
    archive = out / f"{chart['name']}-{version}.tgz"
    archive.write_bytes(gzip.compress(buffer.getvalue(), mtime=0))
    return archive


def _yaml(doc: Any) -> bytes:
    return yaml.safe_dump(doc, sort_keys=False).encode()


def _helmignore(folder: Path) -> Callable[[str], bool]:
    """A matcher for ``.helmignore``'s patterns as Helm reads them: ``name/`` a folder, else a glob on any path
    element (enough for the charts' own files; Helm's full rules also allow ``**`` and negation)."""
    source = folder / ".helmignore"
    lines = source.read_text().splitlines() if source.exists() else []
    patterns = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]

    def ignored(relative: str) -> bool:
        parts = relative.split("/")
        for pattern in patterns:
            if pattern.endswith("/"):
                if any(fnmatch.fnmatch(p, pattern.rstrip("/")) for p in parts[:-1]):
                    return True
            elif any(fnmatch.fnmatch(p, pattern) for p in parts):
                return True
        return False

    return ignored
