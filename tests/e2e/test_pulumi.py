"""The real install path, day two: on the platform test_pulumi_install.py's `pulumi up` installed (and the scenario
files then used), a second up changes nothing → an upgrade (a new team) leaves the webhook certificates alone →
an admin's hand edits are shown by the drift check and repaired → the policy pack blocks a violating change →
secrets never leak → destroy refuses protected data until the documented opt-in. Each step builds on the state
the previous one left (that is the user's path too). No controller pod may restart, be OOM-killed or lose
readiness on the way (checked after the first up and before the destroy).
"""

from __future__ import annotations

import base64
import functools
import json
from typing import Any

import pytest

from tests.e2e.installed import SENTINEL, Deployed
from tests.e2e.test_pulumi_install import cert_secrets, webhook_rejects_invalid_cluster_queue
from trainer_infra.sandbox.kube import ApiError, wait_for
from trainer_infra.sandbox.pulumi_stack import diagnostics
from trainer_infra.sandbox.render import bind_claims

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]
__all__ = ["Deployed"]  # test_pulumi_recovery.py imports it from here


def test_second_up_changes_nothing(deployed: Deployed) -> None:
    before = cert_secrets(deployed)
    result = deployed.timed("up (local, no change)", deployed.project.up("--expect-no-changes"))
    assert result.returncode == 0
    after = cert_secrets(deployed)
    for key in before:
        assert after[key]["metadata"]["resourceVersion"] == before[key]["metadata"]["resourceVersion"], key


def test_upgrade_with_a_new_team_keeps_the_webhook_certificates(deployed: Deployed) -> None:
    before = cert_secrets(deployed)
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
    after = cert_secrets(deployed)
    for key, secret in before.items():
        assert after[key].get("data") == secret.get("data"), f"{key}: webhook certificate changed by `pulumi up`"
    webhook_rejects_invalid_cluster_queue(deployed)


def test_drift_is_shown_by_the_check_and_repaired_by_the_next_up(deployed: Deployed) -> None:
    """An admin's hand edits (docs/drift.md): a ClusterQueue quota, a deleted LocalQueue, a relabelled namespace.
    The drift check is clean on the undisturbed stack (the controllers' own writes, such as the webhook
    certificates, are not drift), names each hand edit and fails; the next `up --refresh` puts them back."""
    client = deployed.sandbox.client
    certificates = cert_secrets(deployed)
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
    for key, secret in cert_secrets(deployed).items():
        assert secret.get("data") == certificates[key].get("data"), f"{key}: webhook certificate changed"
    webhook_rejects_invalid_cluster_queue(deployed)


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
    return not client.exists(inputs["apiVersion"], inputs["kind"], meta["name"], meta.get("namespace"))
