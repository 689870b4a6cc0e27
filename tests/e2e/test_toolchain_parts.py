"""Pure parts of the Pulumi toolchain build and the chart mirror (run in ``make test``, no binaries needed)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import tarfile
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from tests.e2e.run import GO_STEPS, with_pulumi
from trainer_infra.sandbox import leftovers
from trainer_infra.sandbox.build import BuildError
from trainer_infra.sandbox.chart_registry import CHART_TYPE, CONFIG_TYPE, ChartRegistry
from trainer_infra.sandbox.pulumi_stack import diagnostics
from trainer_infra.sandbox.toolchain import (
    Toolchain,
    ToolchainVersions,
    cli_go_mod,
    drop_local_replaces,
    drop_requirement,
    pin_requirements,
    project_requirements,
)
from trainer_infra.sandbox.versions import CHECKOUT

LANGHOST_GOMOD = """module github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3

go 1.25.11

replace (
\tgithub.com/atotto/clipboard => github.com/tgummerer/clipboard v0.0.0-20241001131231-d02d263e614e
\tgithub.com/pulumi/pulumi/pkg/v3 => ../../../../pkg
\tgithub.com/pulumi/pulumi/sdk/v3 => ../../..
)

require (
\tgithub.com/blang/semver v3.5.1+incompatible
\tgithub.com/pulumi/pulumi/pkg/v3 v3.243.0
\tgithub.com/pulumi/pulumi/sdk/v3 v3.258.0
)
"""


def test_language_host_gomod_loses_local_replaces_and_gets_pinned() -> None:
    pkg, sdk = "github.com/pulumi/pulumi/pkg/v3", "github.com/pulumi/pulumi/sdk/v3"
    text = pin_requirements(drop_local_replaces(LANGHOST_GOMOD, {pkg, sdk}), {pkg: "3.259.0", sdk: "3.259.0"})
    assert "=> ../" not in text
    assert "github.com/atotto/clipboard => github.com/tgummerer/clipboard" in text  # kept: not local
    assert f"\t{pkg} v3.259.0\n" in text and f"\t{sdk} v3.259.0\n" in text
    assert "v3.243.0" not in text and "v3.258.0" not in text


def test_pin_requirements_refuses_a_module_the_gomod_does_not_require() -> None:
    with pytest.raises(ValueError, match=r"does not require example\.com/x"):
        pin_requirements(LANGHOST_GOMOD, {"example.com/x": "1.0.0"})


def test_drop_requirement_removes_only_that_module() -> None:
    text = drop_requirement(LANGHOST_GOMOD, "github.com/blang/semver")
    assert "blang/semver" not in text and "pulumi/pkg/v3 v3.243.0" in text


def test_cli_gomod_pins_pkg_and_sdk_with_the_clipboard_replace() -> None:
    text = cli_go_mod("3.259.0")
    assert "github.com/pulumi/pulumi/pkg/v3 v3.259.0" in text and "github.com/pulumi/pulumi/sdk/v3 v3.259.0" in text
    assert "replace github.com/atotto/clipboard => github.com/tgummerer/clipboard" in text


def test_e2e_venv_pins_the_sdks_and_keeps_the_other_runtime_dependencies(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\nname = "x"\ndependencies = ["pulumi>=3.200,<4", "pulumi-kubernetes>=4.34,<5", "pydantic>=2"]\n'
    )
    reqs = project_requirements(pyproject, ToolchainVersions().python_sdks)
    assert reqs == ["pulumi==3.259.0", "pulumi-kubernetes==4.32.0", "pydantic>=2"]


def test_the_declared_sdk_ranges_include_the_versions_the_e2e_proves() -> None:
    """What `pip install trainer-platform` may pick includes what the real install path ran (issue: the e2e
    proved pulumi-kubernetes 4.32.0 while the project asked for >= 4.34)."""
    declared = {
        Requirement(d).name: Requirement(d).specifier
        for d in tomllib.loads((CHECKOUT / "pyproject.toml").read_text())["project"]["dependencies"]
    }
    for pin in ToolchainVersions().python_sdks:
        name, version = pin.split("==")
        assert declared[name].contains(version), f"pyproject.toml asks {name}{declared[name]}; the e2e proves {pin}"
    lines = (CHECKOUT / "policy/requirements.txt").read_text().splitlines()
    policy = [Requirement(r) for r in lines if r.strip() and not r.startswith(("#", "-"))]
    assert all(r.specifier.contains(ToolchainVersions().pulumi) for r in policy if r.name == "pulumi")


def test_a_missing_archive_names_the_step_and_the_file_before_anything_compiles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRAINER_PLATFORM_SHARED", str(tmp_path))
    toolchain = Toolchain(root=tmp_path / "cache")
    ran: list[str] = []
    monkeypatch.setattr(toolchain, "build_cli", lambda: ran.append("pulumi"))
    with pytest.raises(BuildError) as err:
        toolchain.build()
    message = str(err.value)
    assert "'pulumi-language-python'" in message
    assert str(tmp_path / "upstream-src" / "pulumi-language-python-v3.259.0.tar.gz") in message
    assert ran == []  # the CLI (minutes cold) was not built first


def test_a_corrupted_archive_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    upstream = tmp_path / "upstream-src"
    upstream.mkdir()
    (upstream / "pulumi-language-python-v3.259.0.tar.gz").write_bytes(b"not the archive")
    (upstream / "SHA256SUMS").write_text(f"{'0' * 64}  pulumi-language-python-v3.259.0.tar.gz\n")
    monkeypatch.setenv("TRAINER_PLATFORM_SHARED", str(tmp_path))
    with pytest.raises(BuildError, match="does not match its SHA256SUMS"):
        Toolchain(root=tmp_path / "cache").build_language_host()


def _chart_archive(name: str, version: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path, text in {
            f"{name}/Chart.yaml": f"apiVersion: v2\nname: {name}\nversion: {version}\n",
            f"{name}/charts/dep/Chart.yaml": "apiVersion: v2\nname: dep\nversion: 9.9.9\n",
        }.items():
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _get(url: str) -> tuple[int, bytes, dict[str, str]]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read(), dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)


def test_the_mirror_serves_a_chart_under_its_prefix_and_nothing_else(tmp_path: Path) -> None:
    archive = tmp_path / "kueue-0.19.2.tgz"
    archive.write_bytes(_chart_archive("kueue", "0.19.2"))
    with ChartRegistry([archive]) as registry:
        assert registry.mirror == f"oci://{registry.host}/charts"
        base = f"http://{registry.host}/v2/charts/registry.k8s.io/kueue/charts/kueue"
        status, body, headers = _get(f"{base}/manifests/0.19.2")
        assert status == 200
        manifest = json.loads(body)
        assert headers["Docker-Content-Digest"] == "sha256:" + hashlib.sha256(body).hexdigest()
        assert manifest["config"]["mediaType"] == CONFIG_TYPE
        layer = manifest["layers"][0]
        assert layer["mediaType"] == CHART_TYPE
        status, blob, _ = _get(f"{base}/blobs/{layer['digest']}")
        assert status == 200 and blob == archive.read_bytes()
        status, config, _ = _get(f"{base}/blobs/{manifest['config']['digest']}")
        assert json.loads(config)["name"] == "kueue"  # the top-level chart, not the bundled dependency
        assert json.loads(_get(f"{base}/tags/list")[1])["tags"] == ["0.19.2"]
        assert _get(f"{base}/manifests/0.19.1")[0] == 404
        assert _get(f"http://{registry.host}/v2/kueue/charts/kueue/manifests/0.19.2")[0] == 404  # not under the prefix
        assert _get(f"http://{registry.host}/v2/charts/x/jobset/manifests/0.19.2")[0] == 404
        assert registry.pulled() == [f"oci://{registry.host}/charts/registry.k8s.io/kueue/charts/kueue:0.19.2"]


def test_make_e2e_runs_the_install_path_and_auto_only_once_its_go_binaries_are_built(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`make e2e` includes the real install path (CI insists on it); E2E_PULUMI=auto is for machines where a
    cold toolchain build (≈ 8 min) does not fit."""
    ci = (CHECKOUT / ".ci/run").read_text()
    assert "E2E_PULUMI=1 E2E_NODE=1 make e2e" in ci and "make e2e-node-deps" in ci, (
        "CI runs the install path and the node"
    )
    toolchain = Toolchain(root=tmp_path)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    assert with_pulumi([], "", toolchain)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert not with_pulumi([], "", toolchain)
    said = capsys.readouterr().out  # no silent fallback: the scenarios need what the real install path needs
    assert "scenarios" in said and "NOT run" in said and "not root" in said, said
    assert not with_pulumi([], "0", toolchain)
    assert not with_pulumi([], "auto", toolchain)
    assert "make e2e" in capsys.readouterr().out
    assert with_pulumi([], "1", toolchain) and with_pulumi(["tests/e2e/test_pulumi_scale.py"], "0", toolchain)
    assert with_pulumi(["tests/e2e/test_smoke.py"], "0", toolchain)  # a scenario file runs on the real install
    for step in toolchain.steps():
        if step.name in GO_STEPS:
            for output in step.outputs:
                output.parent.mkdir(parents=True, exist_ok=True)
                output.write_text("")
    assert toolchain.missing() == ["python-venv", "pulumi-python-plugin"]
    assert with_pulumi([], "auto", toolchain)  # the venv and the plugin script are built on the way


def test_a_failed_json_preview_shows_each_error_and_its_resource() -> None:
    """`--json` output has no `Diagnostics:` section; its long messages must not push the cause out of view."""
    doc = {
        "steps": [],
        "diagnostics": [
            {"urn": "urn:a", "message": "x" * 9000 + " the cause", "severity": "error"},
            {"urn": "urn:b", "message": "second failure", "severity": "error"},
            {"message": "just info", "severity": "info"},
        ],
    }
    shown = diagnostics(json.dumps(doc, indent=2), limit=2000)
    assert "urn:a: xxx" in shown and "the cause" in shown and "urn:b: second failure" in shown
    assert "just info" not in shown
    assert len(shown) < 2100
    assert diagnostics("Updating...\nDiagnostics:\n  boom\n") == "Diagnostics:\n  boom\n"


def test_a_failing_build_step_names_the_step_the_file_and_its_log_tail(tmp_path: Path) -> None:
    """A compile or generator error surfaces as one message: step, the file it worked on, the log's last lines."""
    toolchain = Toolchain(root=tmp_path)
    schema = tmp_path / "schema.json"
    script = "echo generating; echo 'k8sgen: swagger.json: unexpected end of JSON input' >&2; exit 4"
    with pytest.raises(BuildError) as err:
        toolchain._run("k8sgen-schema", ["sh", "-c", script], tmp_path, env={"PATH": "/usr/bin:/bin"}, about=schema)
    message = str(err.value)
    assert "'k8sgen-schema' failed (exit 4)" in message and str(schema) in message
    assert "k8sgen: swagger.json: unexpected end of JSON input" in message  # the log tail, stderr included
    assert str(toolchain.log_dir / "k8sgen-schema.log") in message


def test_leftovers_finds_what_still_runs_for_a_work_directory(tmp_path: Path) -> None:
    """The check every Pulumi e2e installation ends with: a process found by its directory or environment."""
    inside = tmp_path / "work"
    inside.mkdir()
    by_cwd = subprocess.Popen(["sleep", "60"], cwd=inside)
    by_env = subprocess.Popen(["sleep", "60"], env={"PULUMI_HOME": str(inside / "home")})
    unrelated = subprocess.Popen(["sleep", "60"], cwd=tmp_path)
    try:
        found = " ".join(leftovers.processes_of(inside))
        assert f"{by_cwd.pid}: sleep 60" in found and f"{by_env.pid}: sleep 60" in found
        assert f"{unrelated.pid}:" not in found
    finally:
        for proc in (by_cwd, by_env, unrelated):
            proc.kill()
            proc.wait()
    assert leftovers.processes_of(inside) == []
    with ChartRegistry([]) as registry:
        host, _, port = registry.host.rpartition(":")
        assert leftovers.answering(host, int(port))
    assert not leftovers.answering(host, int(port))


def test_the_e2e_reads_state_as_the_workflows_write_it(tmp_path: Path) -> None:
    """The workflows set PULUMI_DIY_BACKEND_ZSTD: the secrets test reads every file the backend wrote, and the
    recovery test the checkpoint, compressed or not (a .attrs sidecar is plain JSON beside a .zst)."""
    import zstandard

    from trainer_infra.sandbox.pulumi_stack import read_state_file

    doc = '{"checkpoint": {"latest": {"resources": []}}}'
    for name in ("e2e.json.zst", "e2e.json.zst.bak", "e2e.json.zst.attrs", "e2e.json"):
        data = zstandard.ZstdCompressor().compress(doc.encode()) if ".zst" in name and "attrs" not in name else doc
        path = tmp_path / name
        path.write_bytes(data) if isinstance(data, bytes) else path.write_text(data)
        assert json.loads(read_state_file(path)) == json.loads(doc), name
    (tmp_path / "half.json.zst").write_bytes(zstandard.ZstdCompressor().compress(doc.encode())[:9])
    with pytest.raises(ValueError):  # a file being written: the recovery test polls again
        json.loads(read_state_file(tmp_path / "half.json.zst"))
