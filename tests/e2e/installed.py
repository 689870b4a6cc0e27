"""The platform the real ``pulumi up`` installed: one per pytest session, shared by the install tests, the
scenario files (smoke, scenarios, attacks, deputies, migrate, observability) and the day-two tests.

One ``ChartSandbox`` (an empty control plane + kwok + a real node on which the charts' controllers run as pods,
with the charts' RBAC and the configuration the product's Helm values give them) and one Pulumi project whose
stack is ``stacks/Pulumi.local.yaml`` with observability on (``E2E_EXTRA``). A platform admin would have the
Prometheus Operator's CRDs before turning observability on: they are applied before the first ``pulumi up``.
The first ``up`` runs once (``Deployed.install``): test_pulumi_install.py asserts it, the scenario fixtures
(conftest.py) wait for it when a session starts with them.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.pulumi_steps import record_timing
from trainer_infra.manifests.runtime import TRAINER_API_VERSION
from trainer_infra.sandbox.build import Builder
from trainer_infra.sandbox.chart_registry import ChartRegistry
from trainer_infra.sandbox.chart_sandbox import ChartSandbox
from trainer_infra.sandbox.kube import wait_for
from trainer_infra.sandbox.node import MIRROR
from trainer_infra.sandbox.pulumi_stack import Installation, PulumiProject, Result, installation
from trainer_infra.sandbox.render import RenderOutput, bind_claims, check_versions, render_stack, variant_file
from trainer_infra.sandbox.versions import CHECKOUT, VersionSet, cache_root, monitoring_crd_files

Obj = dict[str, Any]
#: A Pulumi secret set in the stack's config; it must never appear in clear text outside the cluster.
SENTINEL = "hf_e2e_SENTINEL_must_never_leak_0123456789"
#: The local stack as the e2e deploys it: observability is off in `local`, on here (it never changes
#: scheduling, so the scenarios hold either way; tests/observability/test_wiring.py shows the render delta); images
#: through the mirror the real node pulls from (``stack_config`` sets it for `pulumi up`; the offline render must
#: say the same, or the pinned images the admission policies compare with differ from the render's).
E2E_EXTRA: Obj = {"observability": {"enabled": True}, "images": {"registryMirror": MIRROR}}


def e2e_stack() -> Obj:
    """``stacks/Pulumi.local.yaml`` with ``E2E_EXTRA`` (what ``render_stack(..., extra=E2E_EXTRA)`` renders)."""
    doc: Obj = yaml.safe_load((CHECKOUT / "stacks" / "Pulumi.local.yaml").read_text())
    doc["config"].update({f"trainer-platform:{key}": value for key, value in E2E_EXTRA.items()})
    return doc


@dataclass
class Deployed:
    """Everything the session's Pulumi tests and scenario fixtures share."""

    installed: Installation
    base: Obj
    render: RenderOutput
    timings: dict[str, float] = field(default_factory=dict)
    #: config changes that later steps keep (an upgrade stays applied)
    kept: dict[str, Any] = field(default_factory=dict)
    #: the first `pulumi up` ran and its controllers became Ready (``install``)
    up_done: bool = False
    up_failed: str = ""

    @property
    def sandbox(self) -> ChartSandbox:
        return self.installed.sandbox

    @property
    def registry(self) -> ChartRegistry:
        return self.installed.registry

    @property
    def project(self) -> PulumiProject:
        return self.installed.project

    def set_config(self, **overrides: Any) -> None:
        """The stack as deployed so far (``kept``) plus ``overrides`` for this step only."""
        self.project.write_stack(self.installed.config(self.base, **{**self.kept, **overrides}))
        self.project.config_secret("trainer-platform:teams[0].secrets.hfToken", SENTINEL)

    def report(self, name: str, outcomes: dict[str, Any]) -> None:
        """Print a run's outcomes and timings, and keep them beside its logs (``<name>-outcomes.json``) and in the
        cache (``toolchain/outcomes/<time>-<name>.json``, as the timings are): pytest shows a passing fixture's
        output only with ``-rA``, and another session's pytest may remove this one's temporary folders."""
        report = {"outcomes": outcomes, "timings": self.timings}
        text = json.dumps(report, indent=2) + "\n"
        (self.project.workdir / f"{name}-outcomes.json").write_text(text)
        kept = cache_root() / "toolchain" / "outcomes" / f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{name}.json"
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(text)
        print(f"[e2e] {name} outcomes: {json.dumps(report)}")

    def timed(self, name: str, result: Result) -> Result:
        self.timings[name] = result.seconds
        record_timing(name, result)
        return result

    def install(self) -> None:
        """The session's first ``pulumi up`` on the empty cluster, then its controllers Ready (once; a failure is
        reported again to every later caller instead of a second up)."""
        if self.up_failed:
            raise AssertionError(f"the session's first `pulumi up` failed:\n{self.up_failed}")
        if self.up_done:
            return
        try:
            self.timed("up (local, empty cluster)", self.project.up())
            self.wait_controllers_ready()
        except Exception as exc:
            self.up_failed = f"{exc}\n{self.failure_context()}"
            raise AssertionError(self.up_failed) from None
        self.up_done = True

    def unprotect_for_teardown(self) -> Result:
        """docs/data-safety.md "Tear down the whole platform", up to the destroy: TrainJobs first (Kueue and
        Trainer keep the queues, flavors and runtimes they use), then ``allowDataLoss`` + up drops the protection
        (deletes nothing). The pack does not read the stack's ``allowDataLoss``: the teardown lowers
        ``data-is-protected`` for this one run (``--policy-pack-config``, docs/policy.md); enforced, the engine
        refuses the unprotect."""
        client = self.sandbox.client
        for ns in client.list("v1", "Namespace"):
            for tj in client.list(TRAINER_API_VERSION, "TrainJob", ns["metadata"]["name"]):
                client.delete(TRAINER_API_VERSION, "TrainJob", tj["metadata"]["name"], ns["metadata"]["name"])
        self.set_config(allowDataLoss=True)
        lowered = self.project.workdir / "teardown-policy-config.json"
        lowered.write_text(json.dumps({"data-is-protected": "advisory"}))
        return self.project.up("--policy-pack-config", str(lowered))

    def failure_context(self) -> str:
        return f"the real node:\n{self.sandbox.describe()}"

    def wait_controllers_ready(self) -> None:
        """Every controller pod Ready on the real node (an OOM kill or a pod elsewhere fails at once), then not
        one restart: the charts' workloads wait for their CRDs (platform/crd_order.py), so no controller starts
        before the API it serves exists."""

        def ready() -> bool:
            problems = self.sandbox.controller_problems(allowed={k: 10**6 for k in self._containers()})
            broken = [p for p in problems if "OOM" in p or "on node" in p]
            if broken:
                raise AssertionError("controller pods failed:\n" + "\n".join(broken))
            return not problems

        began = time.monotonic()
        try:
            wait_for("the charts' controller pods to be Ready on the real node", ready, 300)
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\n{self.failure_context()}") from None
        self.timings["controller pods Ready after the up"] = round(time.monotonic() - began, 1)
        self.sandbox.assert_controllers_healthy()

    def _containers(self) -> list[str]:
        return [
            f"{p['metadata']['namespace']}/{p['metadata']['name']}/{c['name']}"
            for p in self.sandbox.controller_pods()
            for c in p["spec"]["containers"]
        ]


def e2e_render(out: Path) -> RenderOutput:
    """The offline render (``trainer-infra render``) of the stack the session deploys (``e2e_stack``) into ``out``:
    the scenarios read its teams and runtimes, test_observability its rules and dashboards."""
    render = render_stack("local", out, extra=E2E_EXTRA)
    # the controller images are made from the sandbox's binaries: refuse a mismatch now, not as a pull failure
    check_versions(render, VersionSet.from_env())
    return render


def stack_file(render: RenderOutput) -> Path:
    """The stack file of ``e2e_render`` (the stack the session deploys): for the CLI commands a user runs with
    their stack (``trainer-infra migrate --config-file``)."""
    return variant_file("local", render.directory)


@contextmanager
def deployment(work: Path, render: RenderOutput) -> Iterator[Deployed]:
    """The chart sandbox and the Pulumi project, before the first ``up`` (test_pulumi_install.py previews the
    empty cluster first); everything stopped on exit."""
    if os.environ.get("SANDBOX_NO_BUILD") != "1":
        Builder(VersionSet.from_env()).build(node=True)
    base = e2e_stack()
    with installation(work, base) as installed:
        deployed = Deployed(installed, base, render)
        deployed.set_config()
        sandbox = deployed.sandbox
        # a platform admin installs the Prometheus Operator (its CRDs) before turning observability on
        sandbox.apply_crds(monitoring_crd_files(sandbox.versions.prometheus_operator))
        # no provisioner in the sandbox: pre-bound fake PersistentVolumes for the stack's claims
        bind_claims(sandbox.client, render.of_kind("PersistentVolumeClaim"))
        yield deployed
        print(f"[e2e] pulumi timings: {json.dumps(deployed.timings)}")
        print(f"[e2e] chart sandbox start: {json.dumps(sandbox.times)}")
        if sandbox.controller_pods():  # a session that stopped before the destroy: check them now
            sandbox.assert_controllers_healthy()
