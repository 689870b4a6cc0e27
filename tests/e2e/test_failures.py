"""Bad input and failure: a process that cannot start is named with its version and log, nothing is left."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainer_infra.sandbox.build import Builder
from trainer_infra.sandbox.controlplane import Sandbox
from trainer_infra.sandbox.leftovers import answering, processes_of
from trainer_infra.sandbox.processes import SandboxError
from trainer_infra.sandbox.versions import VersionSet

pytestmark = pytest.mark.e2e


def test_failed_start_names_binary_version_log_and_cleans_up(tmp_path: Path) -> None:
    versions = VersionSet.from_env()
    real = Builder(versions).bin_dir
    fake = tmp_path / "bin"
    fake.mkdir()
    for binary in real.iterdir():
        if not binary.name.startswith("."):
            (fake / binary.name).symlink_to(binary)
    (fake / "kube-apiserver").unlink()
    broken = fake / "kube-apiserver"
    broken.write_text("#!/bin/sh\necho 'E0000 simulated: invalid --etcd-servers' >&2\nexit 3\n")
    broken.chmod(0o755)

    sandbox = Sandbox(tmp_path / "sb", versions, bin_dir=fake)
    with pytest.raises(SandboxError) as err:
        sandbox.start()
    message = str(err.value)
    assert "kube-apiserver" in message and f"v{versions.kubernetes}" in message
    assert "exited with code 3" in message
    assert "simulated: invalid --etcd-servers" in message  # the log tail
    # etcd had started before the API server failed: it must be gone, its port free again.
    assert sandbox.processes == []
    assert not answering("127.0.0.1", sandbox.ports.etcd_client)
    # no process of this sandbox (its etcd names its work folder) is left; not "no new etcd on the host": the
    # install session, running beside this one, starts etcds from the same binary
    assert processes_of(tmp_path / "sb") == []
