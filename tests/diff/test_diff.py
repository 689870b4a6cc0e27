"""`trainer-infra diff`: pure comparisons on dicts, then the whole command on real renders of two
commits of a temporary copy of this repository."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.helpers import ROOT
from trainer_infra.core.objects import ManagedObject
from trainer_infra.diff.compare import Render, diff_objects, diff_renders
from trainer_infra.diff.fields import MISSING, FieldChange, field_changes
from trainer_infra.diff.report import markdown, text
from trainer_infra.manifests import meta

# --- pure ------------------------------------------------------------------------------------------


def test_named_lists_match_by_name_and_embedded_yaml_is_compared_as_data() -> None:
    old = {"containers": [{"name": "a", "image": "x:1"}, {"name": "b", "image": "y:1"}]}
    new = {
        "containers": [{"name": "a", "image": "x:1"}, {"name": "new", "image": "z:1"}, {"name": "b", "image": "y:2"}]
    }
    assert field_changes(old, new) == [
        FieldChange("containers[b].image", "y:1", "y:2"),
        FieldChange("containers[new]", MISSING, {"name": "new", "image": "z:1"}),
    ]
    cfg_old = yaml.safe_dump({"integrations": {"frameworks": ["batch/job"]}, "webhook": {"port": 9443}})
    cfg_new = yaml.safe_dump({"integrations": {"frameworks": ["batch/job", "x"]}, "webhook": {"port": 9443}})
    assert field_changes({"cfg": cfg_old}, {"cfg": cfg_new}) == [
        FieldChange("cfg|yaml.integrations.frameworks", ["batch/job"], ["batch/job", "x"])
    ]


def _topology(levels: list[str], api: str = "kueue.x-k8s.io/v1beta2") -> dict[str, Any]:
    return {
        "apiVersion": api,
        "kind": "Topology",
        "metadata": meta.metadata("default"),
        "spec": {"levels": [{"nodeLabel": lv} for lv in levels]},
    }


def _res(manifest: dict[str, Any], **opts: Any) -> dict[str, Any]:
    group_version = manifest["apiVersion"] if "/" in manifest["apiVersion"] else "core/" + manifest["apiVersion"]
    entry = {"type": f"kubernetes:{group_version}:{manifest['kind']}", "name": ManagedObject(manifest).key}
    return {**entry, "protect": False, "retainOnDelete": False, "dependsOn": [], **opts}


def _render(*pairs: tuple[dict[str, Any], dict[str, Any]]) -> Render:
    return Render([m for m, _ in pairs], [], [r for _, r in pairs])


def test_immutable_field_change_on_protected_object_is_a_replace() -> None:
    old = _topology(["cloud.google.com/gce-topology-block", "kubernetes.io/hostname"])
    new = _topology(["kubernetes.io/hostname"])
    diff = diff_renders(_render((old, _res(old, protect=True))), _render((new, _res(new, protect=True))))
    assert [(r.action, r.label) for r in diff.risks] == [("replace", "Topology default")]
    assert "spec.levels" in diff.risks[0].reason
    # the same change on an object nobody protects is an ordinary change, not a data risk
    plain = diff_renders(_render((old, _res(old))), _render((new, _res(new))))
    assert plain.risks == () and [o.op for o in plain.objects] == ["changed"]


def test_declared_replace_on_changes_counts_too() -> None:
    old = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta.metadata("c", "ns"), "data": {"k": "1"}}
    new = {**old, "data": {"k": "2"}}
    r_old, r_new = _res(old, retainOnDelete=True), _res(new, retainOnDelete=True, replaceOnChanges=["data"])
    assert [r.action for r in diff_renders(_render((old, r_old)), _render((new, r_new))).risks] == ["replace"]


def test_api_version_change_is_the_same_object_but_a_new_pulumi_resource() -> None:
    """Pulumi keys resources by type token, which carries the API version: a v1beta1 → v1beta2 move of a
    protected object deletes the old resource unless aliased. Objects show one change, risks one delete."""
    old, new = _topology(["kubernetes.io/hostname"], "kueue.x-k8s.io/v1beta1"), _topology(["kubernetes.io/hostname"])
    diff = diff_renders(_render((old, _res(old, protect=True))), _render((new, _res(new, protect=True))))
    assert [(o.op, [f.path for f in o.fields]) for o in diff.objects] == [("changed", ["apiVersion"])]
    assert [(r.action, r.label) for r in diff.risks] == [("delete", "Topology default")]


def test_dropping_protection_is_loud_and_no_change_is_quiet() -> None:
    ns = meta.namespace("team-a")
    base = _render((ns, _res(ns, protect=True, retainOnDelete=True)))
    diff = diff_renders(base, _render((ns, _res(ns))))
    assert [(r.action, r.reason) for r in diff.risks] == [("unprotect", "protect and retainOnDelete dropped")]
    assert "UNPROTECT Namespace team-a" in text(diff, "t") and "> [!CAUTION]" in markdown(diff, "t")
    same = diff_renders(base, base)
    assert not same.changed and text(same, "t").endswith("no changes\n")
    assert diff_objects([ns], []) and diff_objects([ns], [])[0].op == "removed"


# --- real renders of two commits --------------------------------------------------------------------


def _git(repo: Path, *args: str) -> str:
    cmd = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false", *args]
    return subprocess.run(cmd, cwd=repo, check=True, capture_output=True, text=True).stdout


def _stack(teams: list[str], extra: str) -> str:
    team_lines = "".join(f"    - {{name: {t}}}\n" for t in teams)
    return (
        f"config:\n  trainer-platform:kubernetes: {{version: '1.34'}}\n  trainer-platform:teams:\n{team_lines}{extra}"
    )


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Commit A: teams alpha+beta, JobSet pinned to 0.11.1. Working tree = commit B: beta removed,
    gamma added, JobSet back to the default 0.12.0, Kueue at 2 replicas, and a code change (controller
    cpu request 100m → 150m) that only shows if each side renders with its own code."""
    repo = tmp_path_factory.mktemp("diff") / "repo"
    files = _git(ROOT, "ls-files", "-co", "--exclude-standard").splitlines()
    for name in files:
        if (ROOT / name).is_file():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, repo / name)
    stack = repo / "stacks/Pulumi.local.yaml"
    stack.write_text(_stack(["alpha", "beta"], "  trainer-platform:components: {jobset: {version: 0.11.1}}\n"))
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "A")
    stack.write_text(_stack(["alpha", "gamma"], "  trainer-platform:components: {kueue: {replicas: 2}}\n"))
    common = repo / "trainer_infra/components/settings.py"
    common.write_text(common.read_text().replace('requests={"cpu": "100m"', 'requests={"cpu": "150m"'))
    _git(repo, "commit", "-q", "-am", "B")
    _git(repo, "tag", "A", "HEAD~1")
    yield repo


def _diff(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "trainer_infra", "diff", *args]
    # the bound catches a hang, not slowness: two renders of the stack take 120 s on a 2-core machine at load 30
    return subprocess.run(cmd, cwd=repo, capture_output=True, text=True, timeout=600)


def test_diff_shows_added_changed_removed_and_the_protected_deletion(repo: Path) -> None:
    done = _diff(repo, "--stack", "local", "--base", "A")
    assert done.returncode == 1, done.stderr
    out = done.stdout
    assert "!! DELETE Namespace beta: removed from the program (protect, retainOnDelete)" in out
    assert "+ Namespace gamma" in out and "- Namespace beta" in out
    assert "~ jobset 0.11.1 -> 0.12.0" in out
    assert "values.image.tag: v0.11.1 -> v0.12.0" in out
    assert "values.controllerManager.replicas: 1 -> 2" in out
    # each side rendered with its own code: only the head has the 150m default
    assert out.count("resources.requests.cpu: 100m -> 150m") == 3
    assert _git(repo, "worktree", "list").count("\n") == 1, "the temporary worktree is removed"


def test_markdown_diff_for_a_pr_comment(repo: Path) -> None:
    done = _diff(repo, "--stack", "local", "--base", "A", "--format", "markdown")
    assert done.returncode == 1
    md = done.stdout
    assert md.startswith("### trainer-infra diff: stack `local` (A `")
    assert "> [!CAUTION]" in md and "> - **delete** `Namespace beta`" in md
    assert "| `jobset` | changed | `0.11.1` → `0.12.0` |" in md
    assert "| `values.controllerManager.replicas` | `1` | `2` |" in md


def test_exit_codes_like_git_diff(repo: Path) -> None:
    same = _diff(repo, "--stack", "local", "--base", "HEAD")
    assert (same.returncode, same.stdout.splitlines()[-1]) == (0, "no changes")
    bad = _diff(repo, "--stack", "local", "--base", "no-such-ref")
    assert bad.returncode == 2 and "no-such-ref" in bad.stderr


def test_a_stack_new_in_the_working_tree_diffs_against_nothing(repo: Path) -> None:
    new = repo / "stacks/Pulumi.fresh.yaml"
    new.write_text(_stack(["delta"], ""))
    try:
        done = _diff(repo, "--stack", "fresh", "--base", "HEAD")
    finally:
        new.unlink()
    assert done.returncode == 1
    assert "new stack" in done.stdout.splitlines()[0]
    assert "added, 0 changed, 0 removed" in done.stdout and "+ Namespace delta" in done.stdout
    assert "!!" not in done.stdout, "nothing existed, so nothing is at risk"


def test_markdown_fits_a_github_comment() -> None:
    namespaces = [meta.namespace(f"team-{i:03}") for i in range(200)]
    diff = diff_renders(Render([], [], []), _render(*((ns, _res(ns)) for ns in namespaces)))
    full = markdown(diff, "t", limit=10**9)
    assert "```yaml" in full and len(full) > 20_000
    short = markdown(diff, "t", limit=20_000)
    assert len(short) <= 20_000 and "```yaml" not in short and "Namespace team-199" in short
    cut = markdown(diff, "t", limit=5_000)
    assert len(cut) <= 5_000 and cut.rstrip().endswith("for the whole diff)*")


def test_config_file_outside_the_repo_diffs_the_code_only(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "Pulumi.mine.yaml"
    outside.write_text(_stack(["alpha"], ""))
    done = _diff(repo, "--config-file", str(outside), "--base", "A")
    assert done.returncode == 1, done.stderr
    changes = [line.strip() for line in done.stdout.splitlines() if "->" in line]
    assert len(changes) == 3 and all(c.endswith("requests.cpu: 100m -> 150m") for c in changes), changes
