"""Apply what ``trainer-infra render --stack S --out DIR`` produced to a running sandbox.

Contract (from the foundation issue): ``DIR/manifests.yaml`` holds every Kubernetes
object our Pulumi program creates except Helm charts' contents; ``DIR/helm-releases.yaml``
lists those charts (name/chart/version/namespace/values); ``DIR/resources.json`` the
Pulumi resources. The sandbox runs the charts' controllers itself, so here we only
check that the chart versions match the sandbox's version set, then apply the objects:
Namespaces and cluster-scoped objects first, with server-side apply and strict field
validation (an unknown field is an error, not silently pruned).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from trainer_infra.sandbox import apply
from trainer_infra.sandbox.apply import (
    KUEUE_BEHAVIOUR_KEYS,
    KUEUE_METRIC_KEYS,
    ApplyError,
    apply_objects,
    apply_order,
    bind_claims,
    wait_nodes_ready,
)
from trainer_infra.sandbox.versions import CHECKOUT, VersionSet

Obj = dict[str, Any]

__all__ = ["KUEUE_BEHAVIOUR_KEYS", "KUEUE_METRIC_KEYS", "ApplyError", "apply_objects", "apply_order", "bind_claims"]


class RenderError(RuntimeError):
    """The render output is missing, malformed, or does not match the sandbox."""


@dataclass
class RenderOutput:
    """Parsed render directory."""

    directory: Path
    objects: list[Obj]
    helm_releases: list[Obj] = field(default_factory=list)

    def chart_versions(self) -> dict[str, str]:
        """Versions of the Trainer, JobSet and Kueue charts (without ``v``), by component."""
        found: dict[str, str] = {}
        for release in self.helm_releases:
            chart = str(release.get("chart", "")).lower()
            for fragment, component in apply.CHART_COMPONENTS.items():
                if fragment in chart and release.get("version"):
                    found[component] = str(release["version"]).removeprefix("v")
        return found

    def of_kind(self, kind: str) -> list[Obj]:
        """Objects of one kind, in file order."""
        return [o for o in self.objects if o.get("kind") == kind]


def load_render(directory: Path) -> RenderOutput:
    """Read ``manifests.yaml`` (required) and ``helm-releases.yaml`` (optional)."""
    manifests = directory / "manifests.yaml"
    if not manifests.exists():
        raise RenderError(f"{manifests} does not exist: run `trainer-infra render --stack local --out {directory}`")
    objects = [d for d in yaml.safe_load_all(manifests.read_text()) if d]
    for i, obj in enumerate(objects):
        if not isinstance(obj, dict) or not {"apiVersion", "kind", "metadata"} <= obj.keys():
            raise RenderError(f"{manifests}: document {i} is not a Kubernetes object")
    releases_file = directory / "helm-releases.yaml"
    releases: list[Obj] = []
    if releases_file.exists():
        loaded = yaml.safe_load(releases_file.read_text()) or []
        releases = loaded.get("releases", []) if isinstance(loaded, dict) else list(loaded)
    return RenderOutput(directory, objects, releases)


def kueue_settings(render: RenderOutput) -> Obj:
    """The render's Kueue behaviour for the sandbox's Kueue (trainer_infra/sandbox/apply.py)."""
    return apply.kueue_settings(render.helm_releases)


def check_versions(render: RenderOutput, versions: VersionSet) -> None:
    """Refuse to test a stack against controllers of other versions than it pins."""
    mismatches = {
        comp: (chart, getattr(versions, comp))
        for comp, chart in render.chart_versions().items()
        if chart != getattr(versions, comp)
    }
    if mismatches:
        detail = ", ".join(f"{c}: stack pins {a}, sandbox runs {b}" for c, (a, b) in mismatches.items())
        raise RenderError(
            f"version mismatch between the render and the sandbox ({detail}); "
            "set SANDBOX_<COMPONENT>_VERSION to match, "
            "or pin components.<component>.version in stacks/Pulumi.local.yaml"
        )


def apply_render(sandbox: Any, directory: Path) -> RenderOutput:
    """Apply a render directory to a running harness sandbox and wait for kwok nodes to be Ready (claims: fake
    pre-bound volumes, ``bind_claims``)."""
    render = load_render(directory)
    check_versions(render, sandbox.versions)
    apply_objects(sandbox.client, render.objects)
    bind_claims(sandbox.client, render.of_kind("PersistentVolumeClaim"))
    wait_nodes_ready(sandbox.client, [n["metadata"]["name"] for n in render.of_kind("Node")])
    return render


def variant_file(stack: str, out: Path) -> Path:
    """Where ``render_stack`` writes the stack file it rendered into ``out`` when it adds ``extra`` keys."""
    return out.parent / f"Pulumi.{stack}-e2e.yaml"


def render_stack(stack: str, out: Path, extra: Obj | None = None) -> RenderOutput:
    """Run ``trainer-infra render`` for a stack (the foundation's CLI) into ``out``.

    ``extra`` adds or replaces top-level `trainer-platform:` keys of the stack file (written beside
    ``out`` and rendered with ``--config-file``), e.g. to turn observability on for the e2e.
    """
    source = ["--stack", stack]
    if extra:
        document = yaml.safe_load((CHECKOUT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
        document["config"].update({f"trainer-platform:{key}": value for key, value in extra.items()})
        variant = variant_file(stack, out)
        variant.write_text(yaml.safe_dump(document, sort_keys=False))
        source = ["--config-file", str(variant)]
    cmd = [sys.executable, "-m", "trainer_infra", "render", *source, "--out", str(out)]
    proc = subprocess.run(cmd, cwd=CHECKOUT, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RenderError(f"`{' '.join(cmd)}` failed ({proc.returncode}):\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    return load_render(out)


def controller_users(render: RenderOutput) -> dict[str, str]:
    """component → the username its controller runs as (trainer_infra/sandbox/apply.py)."""
    return apply.controller_users(render.helm_releases)
