"""Pure parts of the chart sandbox (run in ``make test``): the controller images."""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import tarfile
from pathlib import Path

import pytest

from tests.e2e.controller_images import controller_image, controller_images
from tests.e2e.versions import VersionSet


def test_controller_image_is_upstreams_layout_and_reproducible(tmp_path: Path) -> None:
    binary = tmp_path / "manager-binary"
    binary.write_bytes(b"\x7fELF not really")
    first, second = controller_image(binary), controller_image(binary)
    assert first.digest == second.digest  # what the pods' imageID is compared with
    config = json.loads(first.config)["config"]
    # the charts run `command: [/manager]`; distroless static:nonroot's user
    assert (config["Entrypoint"], config["User"]) == (["/manager"], "65532:65532")
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(first.layers[0]))) as tar:
        members = {m.name: m for m in tar.getmembers()}
        manager = tar.extractfile(members["manager"])
        assert manager is not None and manager.read() == binary.read_bytes()
        passwd = tar.extractfile(members["etc/passwd"])
        assert passwd is not None and b"nonroot:x:65532:65532:" in passwd.read()
    assert members["manager"].mode == 0o755
    assert members["tmp"].mode == 0o1777
    assert (members["home/nonroot"].uid, members["home/nonroot"].gid) == (65532, 65532)


def test_every_chart_controller_has_an_image_at_the_built_version() -> None:
    refs = {c.reference: c.binary for c in controller_images(VersionSet())}
    assert refs == {
        "registry.k8s.io/jobset/jobset:v0.12.0": "jobset-manager",
        "registry.k8s.io/kueue/kueue:v0.19.2": "kueue-manager",
        "ghcr.io/kubeflow/trainer/trainer-controller-manager:v2.2.1": "trainer-controller-manager",
        "registry.k8s.io/lws/lws:v0.8.0": "lws-manager",
    }
    with pytest.raises(ValueError, match=r"the sandbox built lws-manager v0\.9\.0"):
        controller_images(dataclasses.replace(VersionSet(), lws="0.9.0"))
