"""Pure parts of the real node (run in ``make test``, no kubelet or containerd needed): the images it pulls, the
mirror serving them, and the configuration that keeps every file of the node in its own work directory."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
import tarfile
import tempfile
import tomllib
from pathlib import Path

import pytest

from tests.e2e.node_session import busybox_image
from tests.e2e.test_toolchain_parts import _chart_archive, _get
from trainer_infra.core.images import mirror_image
from trainer_infra.sandbox import node_host
from trainer_infra.sandbox.chart_registry import ChartRegistry
from trainer_infra.sandbox.controlplane import Sandbox
from trainer_infra.sandbox.node import RealNode
from trainer_infra.sandbox.oci_images import pause_image
from trainer_infra.sandbox.pki import CertificateAuthority
from trainer_infra.sandbox.versions import CHECKOUT


def _layer_members(layer: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(layer))) as tar:
        return {m.name: m for m in tar.getmembers()}


def test_an_image_is_byte_for_byte_reproducible_and_its_config_names_its_layer(tmp_path: Path) -> None:
    binary = tmp_path / "pause"
    binary.write_bytes(b"\x7fELF not really")
    first, second = pause_image(binary), pause_image(binary)
    assert first.digest == second.digest  # what the node ran can be compared with what was published
    manifest, config = json.loads(first.manifest), json.loads(first.config)
    (layer,) = first.layers
    assert manifest["layers"][0]["digest"] == "sha256:" + hashlib.sha256(layer).hexdigest()
    assert config["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(gzip.decompress(layer)).hexdigest()]
    assert config["config"] == {"Entrypoint": ["/pause"], "User": "65535:65535"}
    member = _layer_members(layer)["pause"]
    assert (member.mode, member.uid, member.mtime) == (0o755, 0, 0)


@pytest.mark.skipif(not Path("/bin/busybox").exists(), reason="needs Debian's busybox-static (make e2e-node-deps)")
def test_the_test_image_has_a_shell_an_unprivileged_user_and_a_sticky_tmp() -> None:
    members = _layer_members(busybox_image().layers[0])
    assert members["bin/sh"].linkname == "busybox"
    assert members["tmp"].mode == 0o1777
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(busybox_image().layers[0]))) as tar:
        passwd = tar.extractfile("etc/passwd")
        assert passwd is not None and b"app:x:1000:1000:" in passwd.read()


def test_the_mirror_serves_an_image_under_its_exact_name_beside_the_charts(tmp_path: Path) -> None:
    archive = tmp_path / "kueue-0.19.2.tgz"
    archive.write_bytes(_chart_archive("kueue", "0.19.2"))
    binary = tmp_path / "pause"
    binary.write_bytes(b"pause")
    image = pause_image(binary)
    with ChartRegistry([archive]) as registry:
        ref = mirror_image("registry.k8s.io/pause:3.10.1", f"{registry.host}/k8s")
        assert registry.publish("k8s/registry.k8s.io/pause", "3.10.1", image) == ref
        base = f"http://{registry.host}/v2/k8s/registry.k8s.io/pause"
        status, body, headers = _get(f"{base}/manifests/3.10.1")
        assert (status, body, headers["Docker-Content-Digest"]) == (200, image.manifest, image.digest)
        assert _get(f"{base}/manifests/{image.digest}")[1] == image.manifest
        assert _get(f"{base}/blobs/{json.loads(body)['layers'][0]['digest']}")[1] == image.layers[0]
        status, body, _ = _get(f"{base}/manifests/3.9")
        assert status == 404 and b"k8s/registry.k8s.io/pause/manifests/3.9" in body
        assert _get(f"http://{registry.host}/v2/registry.k8s.io/pause/manifests/3.10.1")[0] == 404  # not mirrored
        assert _get(f"http://{registry.host}/v2/charts/registry.k8s.io/kueue/charts/kueue/manifests/0.19.2")[0] == 200
        assert registry.pulled() == []  # image layers are not counted as chart pulls


def test_every_file_of_the_node_stays_in_its_work_directory(tmp_path: Path) -> None:
    sandbox = Sandbox(tmp_path / "sandbox")
    sandbox.ca = CertificateAuthority(tmp_path / "pki")
    work = tmp_path / "node"
    node = RealNode(
        sandbox,
        work,
        registry_hosts={"mirror.corp:5000": "https://127.0.0.1:4443"},
        registry_ca=sandbox.ca.cert_path,
        sandbox_image="mirror.corp:5000/k8s/registry.k8s.io/pause:3.10.1",
    )
    containerd = tomllib.loads(node.containerd_config())
    cri = containerd["plugins"]["io.containerd.grpc.v1.cri"]
    runc = cri["containerd"]["runtimes"]["runc"]["options"]
    paths = [
        containerd["root"],
        containerd["state"],
        containerd["grpc"]["address"],
        containerd["plugins"]["io.containerd.internal.v1.opt"]["path"],
        cri["cni"]["conf_dir"],
        cri["registry"]["config_path"],
        runc["Root"],
    ]
    kubelet = node.kubelet_config()
    paths += [kubelet["podLogsDir"], kubelet["volumePluginDir"], kubelet["tlsCertFile"], kubelet["resolvConf"]]
    paths.append(node.cni_config()["plugins"][0]["ipam"]["dataDir"])
    assert all(p.startswith(f"{work.resolve()}/") for p in paths), paths
    assert cri["sandbox_image"] == "mirror.corp:5000/k8s/registry.k8s.io/pause:3.10.1"
    assert runc["SystemdCgroup"] is False and kubelet["cgroupDriver"] == "cgroupfs"
    assert kubelet["failCgroupV1"] is False  # kubelet 1.34 runs on cgroup v1 only with this (1.35 refuses)
    assert kubelet["authentication"]["anonymous"]["enabled"] is False
    assert kubelet["cgroupRoot"].startswith("/trainer-platform-e2e-")
    hosts = tomllib.loads(node.hosts_toml("https://127.0.0.1:4443"))
    assert hosts["host"]["https://127.0.0.1:4443"]["capabilities"] == ["pull", "resolve"]
    assert "push" not in hosts["host"]["https://127.0.0.1:4443"]["capabilities"]
    shutil.rmtree(work, ignore_errors=True)


def test_a_missing_package_is_named_with_the_command_that_installs_it(monkeypatch: pytest.MonkeyPatch) -> None:
    makefile = (CHECKOUT / "Makefile").read_text()
    assert f"NODE_PACKAGES := {' '.join(node_host.PACKAGES)}\n" in makefile  # what `make e2e-node-deps` installs
    monkeypatch.setattr(node_host, "PACKAGES", {"containerd": ("/nonexistent/containerd",)})
    with pytest.raises(node_host.NodeError, match=r"\['containerd'\] are not installed: run `make e2e-node-deps`"):
        node_host.preflight()


def test_a_disk_too_full_for_a_node_session_is_named_with_what_to_delete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk made the kubelet fail far from the cause (image GC, evictions): the preflight refuses at once,
    naming the path, its free space and what to delete."""
    free = shutil.disk_usage(tmp_path).free
    monkeypatch.setattr(node_host, "NODE_SESSION_DISK", free + 2**40)  # this disk, a session needing 1 TB more
    with pytest.raises(node_host.NodeError) as refused:
        node_host.preflight(tmp_path / "basetemp" / "node0")  # not created yet: its nearest existing folder is measured
    message = str(refused.value)
    assert f"the disk holding {tmp_path}/basetemp/node0 has " in message and " GB free" in message, message
    assert "rm -rf --one-file-system <basetemp>" in message, message
    monkeypatch.setattr(node_host, "NODE_SESSION_DISK", 0)
    try:
        node_host.preflight(tmp_path)
    except node_host.NodeError as other:  # other prerequisites may be missing where unit tests run; not the space
        assert "GB free" not in str(other)


def test_preflight_names_a_node_folder_too_deep_for_containerd_sockets(tmp_path: Path) -> None:
    """containerd exits at start on a socket path over 104 characters: said before anything starts, with the fix."""
    deep = tmp_path / ("d" * (node_host.SOCKET_PATH_MAX - len(str(tmp_path))))
    with pytest.raises(node_host.NodeError) as err:
        node_host.preflight(deep, in_session=False)
    assert f"{deep}/containerd/containerd.sock.ttrpc" in str(err.value) and "shorter directory" in str(err.value)
    # a short folder passes that check (not tmp_path: pytest's own grows past the limit once its run counter has three
    # digits, /tmp/pytest-of-root/pytest-103/popen-gw0/<test>0, as on a developer's machine)
    short = Path(tempfile.mkdtemp(prefix="n", dir="/tmp"))
    try:
        node_host.preflight(short, in_session=False)
    except node_host.NodeError as other:
        assert "containerd's socket" not in str(other), other
    finally:
        short.rmdir()
