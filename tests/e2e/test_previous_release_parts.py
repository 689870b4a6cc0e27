"""Pure parts of the upgrade e2e (run in ``make test``): the start releases' charts, packaged from their Go
modules. The modules come from the Go module proxy into Go's cache on first use, as for the e2e's builds: these tests
once skipped on a machine whose cache lacked them, so a cold CI never ran them (seen in the cold run of 2026-11-27)."""

from __future__ import annotations

import io
import re
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.previous_release import MODULE_CHARTS, RELEASES, chart_archive
from trainer_infra.sandbox.versions import shared_dir
from trainer_infra.versions import MATRIX


def _files(archive: Path) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(archive.read_bytes())) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


#: the version badge helm-docs writes at the top of a chart's README: the published Trainer 2.2.1 chart's says
#: 2.2.1, the README at the module's v2.2.1 tag still 2.2.0 (regenerated outside the release workflow)
BADGE = re.compile(rb"^!\[Version: [^]]*\]\([^)]*\) ", re.MULTILINE)


@pytest.mark.parametrize(
    "component",
    sorted(MODULE_CHARTS),
)
def test_packaging_the_default_release_from_its_module_gives_the_published_chart(
    tmp_path: Path, component: str
) -> None:
    """The same recipe on the default release reproduces ``../shared/charts/<chart>-<version>.tgz``: its
    Chart.yaml and values (every image its release script sets), and every template and CRD byte for byte (the
    published archives also keep what .helmignore lists)."""
    version = MATRIX.defaults[component]
    archive = chart_archive(component, version, tmp_path)
    chart = archive.name.removesuffix(f"-{version}.tgz")
    ours = _files(archive)
    published = _files(shared_dir() / "charts" / f"{chart}-{version}.tgz")
    # Chart.yaml and values.yaml as data (the release rewrites them), the chart's and each subchart's (Trainer's)
    for name in [n for n in ours if n.endswith(("/Chart.yaml", "/values.yaml"))]:
        assert yaml.safe_load(ours.pop(name)) == yaml.safe_load(published[name]), name
    assert any(n.startswith(f"{chart}/templates/") for n in ours)
    if component == "trainer":
        assert {n.split("/")[2] for n in ours if n.startswith(f"{chart}/charts/")} == {"jobset", "lws"}
        readme = f"{chart}/README.md"
        assert BADGE.sub(b"", ours.pop(readme)) == BADGE.sub(b"", published[readme])
    assert {n: d for n, d in ours.items()} == {n: published[n] for n in ours}
    # .helmignore honoured: each lists the chart's tests (JobSet and Trainer `tests`/`tests/`, Kueue `tests/*`),
    # JobSet and Trainer their README template (Kueue's keeps it)
    assert not [n for n in ours if "/tests/" in n or (component != "kueue" and n.endswith(".gotmpl"))]


#: what each start chart must run: the reference the e2e publishes the start release's controller under
START_IMAGES = {
    "jobset": ("image", "registry.k8s.io/jobset/jobset", "v0.11.1"),
    "kueue": ("controllerManager.manager.image", "registry.k8s.io/kueue/kueue", "v0.18.3"),
}


def _image(values: dict[str, Any], path: str) -> dict[str, Any]:
    for key in path.split("."):
        values = values[key]
    return values


@pytest.mark.parametrize(
    "component",
    [name for name in sorted(RELEASES) if name in START_IMAGES],
)
def test_the_start_release_chart_runs_the_matrix_image(tmp_path: Path, component: str) -> None:
    version = RELEASES[component]
    files = _files(chart_archive(component, version, tmp_path))
    chart, values = yaml.safe_load(files[f"{component}/Chart.yaml"]), yaml.safe_load(files[f"{component}/values.yaml"])
    assert (chart["version"], chart["appVersion"]) == (version, f"v{version}")
    path, repository, tag = START_IMAGES[component]
    assert {k: _image(values, path)[k] for k in ("repository", "tag", "pullPolicy")} == {
        "repository": repository,
        "tag": tag,
        "pullPolicy": "IfNotPresent",
    }
    assert MATRIX.components[component].release(version).images["manager"] == f"{repository}:{tag}"  # type: ignore[union-attr]
    archive = tmp_path / f"{component}-{version}.tgz"
    assert chart_archive(component, version, tmp_path / "again").read_bytes() == archive.read_bytes()


def test_the_start_trainer_chart_runs_the_matrix_images(tmp_path: Path) -> None:
    """Trainer's release sets no value: its chart names no appVersion, and its templates' ``trainer.image`` is
    ``<registry>/<repository>:v<chart version>`` while ``image.tag`` is empty (templates/_helpers.tpl,
    ``trainer.defaultImageTag``); the LWS subchart, packaged by LWS's script, runs the matrix's LWS image."""
    version = RELEASES["trainer"]
    archive = chart_archive("trainer", version, tmp_path)
    files = _files(archive)
    chart = yaml.safe_load(files["kubeflow-trainer/Chart.yaml"])
    assert chart["version"] == version and "appVersion" not in chart
    assert {(d["name"], d["version"]) for d in chart["dependencies"]} == {("jobset", "0.11.0"), ("lws", "0.8.0")}
    image = yaml.safe_load(files["kubeflow-trainer/values.yaml"])["image"]
    assert image["tag"] == ""
    assert 'printf "v%s" .Chart.Version' in files["kubeflow-trainer/templates/_helpers.tpl"].decode()
    release = MATRIX.components["trainer"].release(version)
    assert release is not None
    assert release.images["manager"] == f"{image['registry']}/{image['repository']}:v{version}"
    lws = yaml.safe_load(files["kubeflow-trainer/charts/lws/values.yaml"])["image"]["manager"]
    assert release.images["lws"] == f"{lws['repository']}:{lws['tag']}" and lws["pullPolicy"] == "IfNotPresent"
    jobset = yaml.safe_load(files["kubeflow-trainer/charts/jobset/Chart.yaml"])
    assert (jobset["version"], jobset["appVersion"]) == ("0.11.0", "v0.11.0")
    assert chart_archive("trainer", version, tmp_path / "again").read_bytes() == archive.read_bytes()
