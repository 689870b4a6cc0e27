"""Pure parts of the upgrade e2e (run in ``make test``): the start release's chart, packaged from its Go module."""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

import pytest
import yaml

from tests.e2e.previous_release import START, chart_archive
from tests.e2e.versions import shared_dir


def _files(archive: Path) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(archive.read_bytes())) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def _cached(module: str, version: str) -> bool:
    """Whether the Go module cache holds ``module@v<version>`` (the e2e build downloads it; no network here)."""
    try:
        cache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True).stdout.strip()
    except FileNotFoundError:
        return False
    return bool(cache) and (Path(cache) / f"{module}@v{version}").is_dir()


@pytest.mark.skipif(
    not _cached("sigs.k8s.io/jobset", "0.12.0"), reason="sigs.k8s.io/jobset v0.12.0 not in the Go cache"
)
def test_packaging_the_default_release_from_its_module_gives_the_published_chart(tmp_path: Path) -> None:
    """The same recipe on 0.12.0 reproduces ``../shared/charts/jobset-0.12.0.tgz``: its Chart.yaml and values,
    and every template and CRD byte for byte (the published archive also keeps what .helmignore lists)."""
    ours = _files(chart_archive("jobset", "0.12.0", tmp_path))
    published = _files(shared_dir() / "charts" / "jobset-0.12.0.tgz")
    for name in ("jobset/Chart.yaml", "jobset/values.yaml"):
        assert yaml.safe_load(ours.pop(name)) == yaml.safe_load(published[name]), name
    assert any(n.startswith("jobset/crds/") for n in ours) and any(n.startswith("jobset/templates/") for n in ours)
    assert {n: d for n, d in ours.items()} == {n: published[n] for n in ours}
    assert not [n for n in ours if "/tests/" in n or n.endswith(".gotmpl")]  # .helmignore honoured


@pytest.mark.skipif(
    not _cached("sigs.k8s.io/jobset", START["jobset"]), reason="the start release is not in the Go cache"
)
def test_the_start_release_chart_runs_the_matrix_image(tmp_path: Path) -> None:
    files = _files(chart_archive("jobset", START["jobset"], tmp_path))
    chart, values = yaml.safe_load(files["jobset/Chart.yaml"]), yaml.safe_load(files["jobset/values.yaml"])
    assert (chart["version"], chart["appVersion"]) == (START["jobset"], f"v{START['jobset']}")
    image = {k: values["image"][k] for k in ("repository", "tag", "pullPolicy")}
    assert image == {"repository": "registry.k8s.io/jobset/jobset", "tag": "v0.11.1", "pullPolicy": "IfNotPresent"}
    assert (
        chart_archive("jobset", START["jobset"], tmp_path / "again").read_bytes()
        == (tmp_path / f"jobset-{START['jobset']}.tgz").read_bytes()
    )
