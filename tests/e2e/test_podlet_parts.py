"""Pure parts of the podlet (run in ``make test``): which binary stands for a Pod, how it listens, how it mounts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.e2e.podlet import bind_listeners, image_name_and_tag, localize_config_file, mount_script


def test_image_name_and_tag() -> None:
    assert image_name_and_tag("registry.k8s.io/jobset/jobset:v0.12.0") == ("jobset", "v0.12.0")
    assert image_name_and_tag("mirror:5000/ghcr.io/kubeflow/trainer/trainer-controller-manager:v2.2.1") == (
        "trainer-controller-manager",
        "v2.2.1",
    )
    assert image_name_and_tag("mirror:5000/kueue/kueue@sha256:abc") == ("kueue", "")


def test_listeners_bind_to_the_pod_ip_and_disabled_ones_stay_disabled() -> None:
    config: dict[str, Any] = {
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"port": 9443},
    }
    out = bind_listeners(config, "127.0.90.3")
    assert out["health"]["healthProbeBindAddress"] == "127.0.90.3:8081"
    assert out["metrics"]["bindAddress"] == "0"
    assert out["webhook"] == {"port": 9443, "host": "127.0.90.3"}
    assert "visibilityServer" not in out
    assert config["health"]["healthProbeBindAddress"] == ":8081"  # the input is not modified


def test_defaults_are_bound_too_when_the_chart_leaves_them_out() -> None:
    out = bind_listeners({"kind": "Configuration"}, "127.0.90.4")
    assert out["health"]["healthProbeBindAddress"] == "127.0.90.4:8081"
    assert out["metrics"]["bindAddress"] == "127.0.90.4:8443"


def test_only_component_configurations_are_rewritten_and_kueue_gets_its_visibility_server() -> None:
    kueue = "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nnamespace: kueue-system\n"
    out = yaml.safe_load(localize_config_file(kueue, "127.0.90.5"))
    assert out["visibilityServer"] == {"bindAddress": "127.0.90.5"} and out["namespace"] == "kueue-system"
    jobset = "apiVersion: config.jobset.x-k8s.io/v1alpha1\nkind: Configuration\n"
    assert "visibilityServer" not in yaml.safe_load(localize_config_file(jobset, "127.0.90.5"))
    other = "kind: ConfigMapData\nkey: ':8081'\n"
    assert localize_config_file(other, "127.0.90.5") == other
    assert localize_config_file("not: [yaml", "127.0.90.5") == "not: [yaml"


def test_mount_script_binds_volumes_inside_an_overlay_root(tmp_path: Path) -> None:
    volumes = tmp_path / "volumes"
    cert_dir = volumes / "cert"
    cert_dir.mkdir(parents=True)
    config = volumes / "config" / "config.yaml"
    config.parent.mkdir()
    config.write_text("x")
    script = mount_script(
        tmp_path / "rootfs",
        volumes,
        [(cert_dir, "/var/run/certs"), (config, "/controller_manager_config.yaml")],
        "/bin/manager",
        ["--config=/controller_manager_config.yaml"],
    )
    merged = tmp_path / "rootfs" / "merged"
    assert f"lowerdir=/,upperdir={tmp_path / 'rootfs' / 'upper'}" in script
    assert f"mount --bind {volumes} {merged}/.podlet-volumes" in script
    # inside the chroot, so that /var/run (a symlink to /run) resolves in the Pod's root, not the host's
    inner = script[script.index("exec chroot") :]
    assert inner.startswith(f"exec chroot {merged} /bin/sh -ec ")
    assert "mount --bind /.podlet-volumes/cert /var/run/certs" in inner
    assert "touch /controller_manager_config.yaml" in inner  # a file mount needs a file to bind onto
    assert "exec /bin/manager --config=/controller_manager_config.yaml" in inner
