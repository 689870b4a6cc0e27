"""Pure parts of the chart sandbox (run in ``make test``): the controller images and the e2e stack's placement."""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import tarfile
from pathlib import Path

import pytest
import yaml

from trainer_infra.sandbox.chart_sandbox import REAL_NODE, REAL_NODE_TAINT
from trainer_infra.sandbox.controller_images import controller_image, controller_images
from trainer_infra.sandbox.node import MIRROR
from trainer_infra.sandbox.pulumi_stack import stack_config
from trainer_infra.sandbox.versions import CHECKOUT, VersionSet


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


def test_e2e_stack_places_the_controllers_on_the_real_node_under_any_components_override() -> None:
    base = yaml.safe_load((CHECKOUT / "stacks" / "Pulumi.local.yaml").read_text())
    override = {"kueue": {"values": {"controllerManager": {"manager": {"resources": {"requests": None}}}}}}
    config = stack_config(base, context="e2e", mirror="oci://m/charts", components=override)["config"]
    assert config["trainer-platform:images"]["registryMirror"] == MIRROR
    kueue = config["trainer-platform:components"]["kueue"]["values"]["controllerManager"]
    assert kueue["manager"] == {"resources": {"requests": None}}  # the override stays
    assert kueue["nodeSelector"] == {"kubernetes.io/hostname": REAL_NODE}
    assert kueue["tolerations"] == [{**REAL_NODE_TAINT, "operator": "Equal"}]
    trainer = config["trainer-platform:components"]["trainer"]["values"]
    assert {"manager", "lws"} <= trainer.keys()
    driver = config["trainer-platform:storage"]["nfs"]["driver"]["values"]
    terms = driver["node"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"][0]["operator"] == "NotIn"
    assert "trainer-platform:images" not in base["config"]  # the base stack is left as it was
