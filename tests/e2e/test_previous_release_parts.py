"""Pure parts of the upgrade e2e (run in ``make test``): the start releases' charts, packaged from their Go
modules."""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

from tests.e2e.previous_release import MODULE_CHARTS, RELEASES, chart_archive
from tests.e2e.versions import shared_dir
from trainer_infra.versions import MATRIX


def _files(archive: Path) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(archive.read_bytes())) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def _cached(component: str, version: str) -> bool:
    """Whether the Go module cache holds the component's module at ``v<version>`` (the e2e build downloads it; no
    network here)."""
    try:
        cache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True).stdout.strip()
    except FileNotFoundError:
        return False
    return bool(cache) and (Path(cache) / f"{MODULE_CHARTS[component].module}@v{version}").is_dir()


def _skip_unless_cached(component: str, version: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(not _cached(component, version), reason=f"{component} v{version} not in the Go cache")


@pytest.mark.parametrize(
    "component",
    [pytest.param(name, marks=_skip_unless_cached(name, MATRIX.defaults[name])) for name in sorted(MODULE_CHARTS)],
)
def test_packaging_the_default_release_from_its_module_gives_the_published_chart(
    tmp_path: Path, component: str
) -> None:
    """The same recipe on the default release reproduces ``../shared/charts/<chart>-<version>.tgz``: its
    Chart.yaml and values (every image its release script sets), and every template and CRD byte for byte (the
    published archives also keep what .helmignore lists)."""
    version = MATRIX.defaults[component]
    ours = _files(chart_archive(component, version, tmp_path))
    chart = yaml.safe_load(ours[f"{component}/Chart.yaml"])["name"]
    published = _files(shared_dir() / "charts" / f"{chart}-{version}.tgz")
    for name in (f"{chart}/Chart.yaml", f"{chart}/values.yaml"):
        assert yaml.safe_load(ours.pop(name)) == yaml.safe_load(published[name]), name
    assert any(n.startswith(f"{chart}/templates/") for n in ours)
    assert {n: d for n, d in ours.items()} == {n: published[n] for n in ours}
    # .helmignore honoured: both list the chart's tests (JobSet `tests`, Kueue `tests/*`), JobSet its README template
    assert not [n for n in ours if "/tests/" in n or (component == "jobset" and n.endswith(".gotmpl"))]


#: what each start chart must run: the reference the e2e publishes the start release's controller under
START_IMAGES = {
    "jobset": ("image", "registry.k8s.io/jobset/jobset", "v0.11.1"),
    "kueue": ("controllerManager.manager.image", "registry.k8s.io/kueue/kueue", "v0.18.3"),
}


@pytest.mark.parametrize(
    "component", [pytest.param(name, marks=_skip_unless_cached(name, RELEASES[name])) for name in sorted(RELEASES)]
)
def test_the_start_release_chart_runs_the_matrix_image(tmp_path: Path, component: str) -> None:
    version = RELEASES[component]
    files = _files(chart_archive(component, version, tmp_path))
    chart, values = yaml.safe_load(files[f"{component}/Chart.yaml"]), yaml.safe_load(files[f"{component}/values.yaml"])
    assert (chart["version"], chart["appVersion"]) == (version, f"v{version}")
    path, repository, tag = START_IMAGES[component]
    for key in path.split("."):
        values = values[key]
    assert {k: values[k] for k in ("repository", "tag", "pullPolicy")} == {
        "repository": repository,
        "tag": tag,
        "pullPolicy": "IfNotPresent",
    }
    assert MATRIX.components[component].release(version).images["manager"] == f"{repository}:{tag}"  # type: ignore[union-attr]
    archive = tmp_path / f"{component}-{version}.tgz"
    assert chart_archive(component, version, tmp_path / "again").read_bytes() == archive.read_bytes()
