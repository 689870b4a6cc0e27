"""The real install path: `pulumi preview`/`up`/`destroy` with the real engine, provider and charts.

One ``ChartSandbox`` (an empty control plane + kwok + a real node on which the charts' controllers run as pods)
and one Pulumi project for the module; the tests run in order and each builds on the state the previous one
left (that is the user's path too): preview on an empty cluster → up → the SDK scenario on what Pulumi deployed
→ a second up changes nothing → an upgrade (a new team) leaves the webhook certificates alone → the policy pack
blocks a violating change → secrets never leak → destroy refuses protected data until the documented opt-in.
No controller pod may restart, be OOM-killed or lose readiness on the way (checked after the first up and
before the destroy).
"""

from __future__ import annotations

import base64
import functools
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml

from tests.e2e.chart_registry import ChartRegistry
from tests.e2e.chart_sandbox import REAL_NODE, ChartSandbox
from tests.e2e.kube import ApiError, wait_for
from tests.e2e.node import MIRROR
from tests.e2e.platform import Platform
from tests.e2e.pulumi_stack import (
    Installation,
    PulumiProject,
    Result,
    diagnostics,
    installation,
    kind_name,
    record_timing,
)
from tests.e2e.render import RenderOutput, bind_claims, check_versions, render_stack
from tests.e2e.test_deputies import MEMBER_ATTACKS, bystander_job
from tests.e2e.test_scenarios import sdk_flow
from tests.e2e.versions import REPO_ROOT, VersionSet
from trainer_infra.core.images import mirror_image
from trainer_infra.manifests.runtime import TRAINER_API_VERSION

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]
#: A Pulumi secret set in the stack's config; it must never appear in clear text outside the cluster.
SENTINEL = "hf_e2e_SENTINEL_must_never_leak_0123456789"
CHART_COMPONENTS = ("jobset", "kueue", "kubeflow-trainer")
#: chart Secrets that the controllers fill with their webhook certificates at run time
CERT_SECRETS = (
    ("jobset-system", "jobset-webhook-server-cert"),
    ("kubeflow-system", "kubeflow-trainer-webhook-cert"),
    ("kubeflow-system", "lws-webhook-server-cert"),  # the local stack's data cache installs LWS
)


@dataclass
class Deployed:
    """Everything the module's tests share."""

    installed: Installation
    base: Obj
    render: RenderOutput
    timings: dict[str, float] = field(default_factory=dict)
    #: config changes that later steps keep (an upgrade stays applied)
    kept: dict[str, Any] = field(default_factory=dict)

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

    def timed(self, name: str, result: Result) -> Result:
        self.timings[name] = result.seconds
        record_timing(name, result)
        return result

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


@pytest.fixture(scope="module")
def plain_render(tmp_path_factory: pytest.TempPathFactory) -> RenderOutput:
    """The offline render of the stack Pulumi deploys: ``stacks/Pulumi.local.yaml`` as it is (no e2e extras)."""
    render = render_stack("local", tmp_path_factory.mktemp("render") / "out")
    # the controller images are made from the sandbox's binaries: refuse a mismatch now, not as a pull failure
    check_versions(render, VersionSet.from_env())
    return render


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory, plain_render: RenderOutput) -> Iterator[Deployed]:
    base = yaml.safe_load((REPO_ROOT / "stacks" / "Pulumi.local.yaml").read_text())
    with installation(tmp_path_factory.mktemp("pulumi"), base) as installed:
        deployed = Deployed(installed, base, plain_render)
        deployed.set_config()
        # no provisioner in the sandbox: pre-bound fake PersistentVolumes for the stack's claims
        bind_claims(deployed.sandbox.client, plain_render.of_kind("PersistentVolumeClaim"))
        yield deployed
        print(f"[e2e] pulumi timings: {json.dumps(deployed.timings)}")
        print(f"[e2e] chart sandbox start: {json.dumps(deployed.sandbox.times)}")
        if deployed.sandbox.controller_pods():  # a session that stopped before the destroy: check them now
            deployed.sandbox.assert_controllers_healthy()


def test_preview_on_an_empty_cluster_lists_every_object(deployed: Deployed) -> None:
    result = deployed.timed("preview (local, empty cluster)", deployed.project.preview("--json"))
    steps = result.steps()
    assert steps and {s["op"] for s in steps} == {"create"}, {s["op"] for s in steps}
    planned = {kind_name(s) for s in steps}
    # every object of the offline render is in the engine's plan ...
    missing = [
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])
        for o in deployed.render.objects
        if (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) not in planned
    ]
    assert not missing, f"render objects absent from `pulumi preview`: {missing[:20]}"
    # ... and so is every chart object (the offline render only lists the releases)
    deployments = {(ns, name) for kind, ns, name in planned if kind == "Deployment"}
    for ns in ("jobset-system", "kueue-system", "kubeflow-system"):
        assert any(d_ns == ns for d_ns, _ in deployments), f"no chart Deployment in {ns}: {sorted(deployments)}"
    kinds = {kind for kind, _, _ in planned}
    assert {"CustomResourceDefinition", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} <= kinds
    # the charts' workloads carry the order after every CRD of their chart (platform/crd_order.py, run by Helm)
    planned_objects = [(s["urn"], s["newState"].get("inputs") or {}) for s in steps if s.get("newState")]
    wrong = _unordered(
        planned_objects,
        lambda _, inputs, crds: (
            sorted(inputs["metadata"].get("annotations", {}).get(DEPENDS_ON, "").split(","))
            == sorted(f"apiextensions.k8s.io/CustomResourceDefinition/{name}" for name in crds.values())
        ),
    )
    assert not wrong, f"chart workloads not annotated with every CRD of their chart: {wrong}"
    # the charts came through the product's air-gap path: the stack's mirror, nothing else
    pulled = deployed.registry.pulled()
    expected = {f"{deployed.registry.mirror}/{_upstream_path(r)}:{r['version']}" for r in deployed.render.helm_releases}
    assert expected <= {p for p in pulled}, (sorted(expected), pulled)


DEPENDS_ON = "config.kubernetes.io/depends-on"
CHART_CHILD = "kubernetes:helm.sh/v4:Chart$"


def _unordered(objects: list[tuple[str, Obj]], ordered: Callable[[str, Obj, dict[str, str]], bool]) -> list[str]:
    """The chart workloads (Deployment, StatefulSet, DaemonSet) that ``ordered(urn, inputs, crds)`` finds not after
    every CRD of their own chart (``crds``: URN → name); fails when a chart with CRDs has no workload."""
    charts: dict[str, dict[str, str]] = {}
    workloads: dict[str, list[tuple[str, Obj]]] = {}
    for urn, inputs in objects:
        if CHART_CHILD not in urn:
            continue
        release = urn.rsplit("::", 1)[1].split(":", 1)[0]
        if inputs.get("kind") == "CustomResourceDefinition":
            charts.setdefault(release, {})[urn] = inputs["metadata"]["name"]
        elif inputs.get("kind") in ("Deployment", "StatefulSet", "DaemonSet"):
            workloads.setdefault(release, []).append((urn, inputs))
    assert {"jobset", "kueue", "trainer"} <= set(charts), sorted(charts)
    assert all(workloads.get(release) for release in charts), {r: len(workloads.get(r, [])) for r in charts}
    return [
        urn for release, crds in charts.items() for urn, inputs in workloads[release] if not ordered(urn, inputs, crds)
    ]


def _upstream_path(release: Obj) -> str:
    """Where a release's chart lives upstream, without the scheme: the path it has under the mirror."""
    if release.get("repository"):
        return f"{str(release['repository']).removeprefix('https://').rstrip('/')}/{release['chart']}"
    return str(release["chart"]).removeprefix("oci://")


def test_controllers_have_no_cpu_limit_in_the_rendered_charts(deployed: Deployed) -> None:
    """The project sets a memory limit only; the charts' own limits.cpu must not survive Helm's merge."""
    result = deployed.project.preview("--json")
    found = {}
    for step in result.steps():
        kind, ns, name = kind_name(step)
        if kind != "Deployment" or ns not in ("jobset-system", "kueue-system", "kubeflow-system"):
            continue
        for c in step["newState"]["inputs"]["spec"]["template"]["spec"]["containers"]:
            found[f"{ns}/{name}/{c['name']}"] = (c.get("resources") or {}).get("limits") or {}
    assert found
    with_cpu = {k: v for k, v in found.items() if "cpu" in v}
    assert not with_cpu, f"chart containers keep a cpu limit: {with_cpu}"
    assert all("memory" in v for v in found.values()), found


def _cert_secrets(deployed: Deployed) -> dict[tuple[str, str], Obj]:
    return {(ns, n): deployed.sandbox.client.get("v1", "Secret", n, ns) for ns, n in CERT_SECRETS}


def _webhook_rejects_invalid_cluster_queue(deployed: Deployed) -> None:
    bad = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "e2e-invalid"},
        "spec": {"cohortName": "Not_A_DNS_Label", "resourceGroups": []},
    }
    with pytest.raises(ApiError) as err:
        deployed.sandbox.client.create(bad, dry_run=True)
    assert "failed calling webhook" not in err.value.message, err.value.message


def test_up_installs_the_platform_from_the_charts(deployed: Deployed) -> None:
    try:
        deployed.timed("up (local, empty cluster)", deployed.project.up())
    except Exception as exc:
        raise AssertionError(f"{exc}\n{deployed.failure_context()}") from None
    client = deployed.sandbox.client
    # the controllers serving the cluster are the charts' pods, containers on the real node from the images the
    # mirror served under the charts' references (the images the e2e made from the pinned sources)
    deployed.wait_controllers_ready()
    published = deployed.sandbox.published
    seen = set()
    for pod in deployed.sandbox.controller_pods():
        assert pod["spec"]["nodeName"] == REAL_NODE, (pod["metadata"]["name"], pod["spec"].get("nodeName"))
        for status in pod["status"]["containerStatuses"]:
            upstream = next(u for u in published if status["image"] == mirror_image(u, MIRROR))
            assert status["imageID"] == f"{status['image'].rsplit(':', 1)[0]}@{published[upstream]}", status
            seen.add(upstream)
    assert seen == set(published), f"published but never run: {sorted(set(published) - seen)}"
    # webhooks are the charts' (Service references, caBundle injected by the controllers), reached via Services
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        for cfg in client.list("admissionregistration.k8s.io/v1", kind):
            for hook in cfg.get("webhooks", []):
                assert "service" in hook["clientConfig"], (cfg["metadata"]["name"], hook["clientConfig"])
                assert hook["clientConfig"].get("caBundle"), f"{cfg['metadata']['name']}: no caBundle injected"
    _webhook_rejects_invalid_cluster_queue(deployed)
    for (ns, name), secret in _cert_secrets(deployed).items():
        assert secret.get("data", {}).get("tls.crt"), f"{ns}/{name} has no certificate"
    # the controllers own the certificates: Pulumi applied the chart's placeholders without `data`
    # (else a refreshed preview, the drift check, proposes replacing them with the controllers' content)
    state = deployed.project.export()["deployment"]["resources"]
    applied = {
        (r["inputs"]["metadata"].get("namespace"), r["inputs"]["metadata"]["name"]): r["inputs"]
        for r in state
        if r["type"] == "kubernetes:core/v1:Secret"
    }
    for key in CERT_SECRETS:
        assert "data" not in applied[key], f"{key}: the chart's empty certificate was applied by Pulumi"
    # in the engine's graph each chart workload depends on every CRD of its chart: created after them
    needs = {r["urn"]: set(r.get("dependencies") or []) for r in state}
    wrong = _unordered([(r["urn"], r.get("inputs") or {}) for r in state], lambda urn, _, crds: set(crds) <= needs[urn])
    assert not wrong, f"chart workloads that the engine may create before their chart's CRDs: {wrong}"


def test_sdk_scenario_on_what_pulumi_deployed(deployed: Deployed) -> None:
    sdk_flow(deployed.sandbox, Platform(deployed.render, list(deployed.render.objects)))


def test_deputy_attacks_on_what_pulumi_deployed(deployed: Deployed) -> None:
    """Issue #27's member attacks on the charts' controllers and the policies `pulumi up` applied: each refused
    at submit with its message, and another team's admitted job undisturbed."""
    platform = Platform(deployed.render, list(deployed.render.objects))
    with bystander_job(deployed.sandbox, platform) as bystander:
        for attack in MEMBER_ATTACKS:
            attack(deployed.sandbox, platform, bystander)


def test_second_up_changes_nothing(deployed: Deployed) -> None:
    before = _cert_secrets(deployed)
    result = deployed.timed("up (local, no change)", deployed.project.up("--expect-no-changes"))
    assert result.returncode == 0
    after = _cert_secrets(deployed)
    for key in before:
        assert after[key]["metadata"]["resourceVersion"] == before[key]["metadata"]["resourceVersion"], key


def test_upgrade_with_a_new_team_keeps_the_webhook_certificates(deployed: Deployed) -> None:
    before = _cert_secrets(deployed)
    teams = list(deployed.base["config"]["trainer-platform:teams"])
    teams.append(
        {
            "name": "e2e-new",
            "quota": {"h100": {"gpus": 0}},
            "members": {"users": ["carol@example.com"]},
            "storage": {"size": "1Gi"},
        }
    )
    deployed.kept["teams"] = teams
    deployed.set_config()
    # the new team's claim is like every team's (class, access modes), with its own size
    claim = dict(deployed.render.of_kind("PersistentVolumeClaim")[0])
    claim["metadata"] = {"namespace": "e2e-new", "name": claim["metadata"]["name"]}
    claim["spec"] = {**claim["spec"], "resources": {"requests": {"storage": "1Gi"}}}
    bind_claims(deployed.sandbox.client, [claim])
    deployed.timed("up (local, a new team)", deployed.project.up())
    after = _cert_secrets(deployed)
    for key, secret in before.items():
        assert after[key].get("data") == secret.get("data"), f"{key}: webhook certificate changed by `pulumi up`"
    _webhook_rejects_invalid_cluster_queue(deployed)


def test_drift_is_shown_by_the_check_and_repaired_by_the_next_up(deployed: Deployed) -> None:
    """An admin's hand edits (docs/drift.md): a ClusterQueue quota, a deleted LocalQueue, a relabelled namespace.
    The drift check is clean on the undisturbed stack (the controllers' own writes, such as the webhook
    certificates, are not drift), names each hand edit and fails; the next `up --refresh` puts them back."""
    client = deployed.sandbox.client
    certificates = _cert_secrets(deployed)
    queue = client.get("kueue.x-k8s.io/v1beta2", "ClusterQueue", "nlp")
    quota = queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    enforce = client.get("v1", "Namespace", "nlp")["metadata"]["labels"]["pod-security.kubernetes.io/enforce"]
    clean = deployed.timed("drift check (local, none)", deployed.project.drift())
    assert clean.returncode == 0, diagnostics(clean.output)
    _hand_edit(client, "kueue.x-k8s.io/v1beta2", "ClusterQueue", "nlp", None, _with_quota(queue, "1"))
    client.delete("kueue.x-k8s.io/v1beta2", "LocalQueue", "default", "nlp")
    relabel = {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "privileged"}}}
    _hand_edit(client, "v1", "Namespace", "nlp", None, relabel)
    found = deployed.timed("drift check (local, three hand edits)", deployed.project.drift())
    assert found.returncode == 1, found.output[-6000:]
    for shown in ("clusterqueue-nlp", "localqueue-nlp-default", "namespace-nlp", "nominalQuota", "enforce"):
        assert shown in found.output, (shown, found.output[-6000:])
    assert "to replace" not in found.output and "to delete" not in found.output, found.output[-6000:]
    # as the deploy workflow runs it (pulumi-up.yml: `refresh: true`)
    deployed.timed("up --refresh (local, repairs three hand edits)", deployed.project.up("--refresh"))
    repaired = client.get("kueue.x-k8s.io/v1beta2", "ClusterQueue", "nlp")
    assert repaired["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0] == quota
    assert client.get("kueue.x-k8s.io/v1beta2", "LocalQueue", "default", "nlp")
    assert client.get("v1", "Namespace", "nlp")["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == enforce
    after = deployed.timed("drift check (local, after the repair)", deployed.project.drift())
    assert after.returncode == 0, diagnostics(after.output)
    for key, secret in _cert_secrets(deployed).items():
        assert secret.get("data") == certificates[key].get("data"), f"{key}: webhook certificate changed"
    _webhook_rejects_invalid_cluster_queue(deployed)


def _with_quota(queue: Obj, value: str) -> Obj:
    groups = json.loads(json.dumps(queue["spec"]["resourceGroups"]))
    groups[0]["flavors"][0]["resources"][0]["nominalQuota"] = value
    return {"spec": {"resourceGroups": groups}}


def _hand_edit(client: Any, api_version: str, kind: str, name: str, namespace: str | None, patch: Obj) -> None:
    """As `kubectl patch` does it: a merge patch under kubectl's field manager."""
    path = client.path(api_version, kind, namespace, name)
    client.request(
        "PATCH", path, patch, params={"fieldManager": "kubectl-patch"}, content_type="application/merge-patch+json"
    )


def test_policy_pack_in_the_engine_blocks_a_violating_change(deployed: Deployed) -> None:
    """In the PR preview and in `up` as the deploy workflow runs it (`policyPacks: policy`): refused by the
    engine running the pack, and nothing of the change applied."""
    client = deployed.sandbox.client
    before = {d["metadata"]["name"]: d for d in client.list("apps/v1", "Deployment", "kueue-system")}
    deployed.set_config(
        components={
            **deployed.base["config"]["trainer-platform:components"],
            "kueue": {
                **deployed.base["config"]["trainer-platform:components"]["kueue"],
                # `resources.requests: {}` is not a violation: Helm keeps the chart's defaults; null removes them
                "values": {"controllerManager": {"manager": {"resources": {"requests": None}}}},
            },
        }
    )
    try:
        result = deployed.project.preview(check=False)
        refused = deployed.timed("up (local, refused by the policy pack)", deployed.project.up(check=False))
    finally:
        deployed.set_config()
    for run in (result, refused):
        assert run.returncode != 0, run.output[-3000:]
        assert "controllers-request-resources" in run.output, diagnostics(run.output)
        assert SENTINEL not in run.output
    after = {d["metadata"]["name"]: d for d in client.list("apps/v1", "Deployment", "kueue-system")}
    assert after.keys() == before.keys()
    for name, deployment in after.items():
        kept = deployment["metadata"]["generation"] == before[name]["metadata"]["generation"]
        assert kept, f"kueue-system/{name} was changed by an `up` the policy pack refused"
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            assert container.get("resources", {}).get("requests"), f"{name}/{container['name']} lost its requests"


def test_secrets_never_appear_in_state_output_or_messages(deployed: Deployed) -> None:
    state = deployed.project.state_files_text()
    assert state, "the file backend wrote no state"
    assert SENTINEL not in state
    assert base64.b64encode(SENTINEL.encode()).decode() not in state
    for result in deployed.project.results:
        assert SENTINEL not in result.output, result.args
        # set with `pulumi config set --secret`: the engine hands it over decrypted, the program must not warn
        assert "a secret in plain text" not in result.output, (result.args, diagnostics(result.output))
    secret = deployed.sandbox.client.get("v1", "Secret", "hf-token", "nlp")
    assert base64.b64decode(secret["data"]["HF_TOKEN"]).decode() == SENTINEL  # it did reach the cluster


def test_destroy_refuses_protected_data_until_the_documented_opt_in(deployed: Deployed) -> None:
    client = deployed.sandbox.client
    # the last moment the controllers run: none restarted, was OOM-killed or lost readiness in the session
    deployed.sandbox.assert_controllers_healthy()
    refused = deployed.project.destroy(check=False)
    assert refused.returncode != 0
    assert "protected" in refused.output
    assert client.get("v1", "Namespace", "nlp")
    assert client.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", "clusterqueues.kueue.x-k8s.io")
    # the refusal deleted nothing, not even what is unprotected
    queue = client.get("kueue.x-k8s.io/v1beta2", "ClusterQueue", "nlp")
    assert "deletionTimestamp" not in queue["metadata"], "a refused destroy deleted the ClusterQueue"
    deployed.unprotect_for_teardown()  # then the destroy
    assert client.get("v1", "Namespace", "nlp")
    export = deployed.project.export()
    resources = export["deployment"]["resources"]
    retained = {r["urn"] for r in resources if r.get("retainOnDelete")}
    deployed.timed("destroy (local, opt-in)", deployed.project.destroy())
    gone = []
    for r in resources:
        inputs = r.get("inputs") or {}
        if not str(r["type"]).startswith("kubernetes:") or "kind" not in inputs or r["urn"] in retained:
            continue
        meta = inputs.get("metadata") or {}
        try:
            client.get(inputs["apiVersion"], inputs["kind"], meta["name"], meta.get("namespace"))
        except ApiError as exc:
            if exc.status == 404:
                gone.append(r["urn"])
                continue
            raise
        wait_for(
            f"{inputs['kind']} {meta.get('namespace', '')}/{meta['name']} to be deleted",
            functools.partial(_absent, client, inputs, meta),
            120,
        )
    assert gone


def _absent(client: Any, inputs: Obj, meta: Obj) -> bool:
    try:
        client.get(inputs["apiVersion"], inputs["kind"], meta["name"], meta.get("namespace"))
    except ApiError as exc:
        return exc.status == 404
    return False
