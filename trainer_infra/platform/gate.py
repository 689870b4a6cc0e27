"""The readiness gate: one resource per controller that custom resources depend on.

Pulumi waits for chart Deployments, but neither for CRDs to be Established nor for an admission
webhook to answer (Kueue's fails for 10-30 s after its Deployment is Ready, kueue#13036). The gate's
create/update polls both, by dry-run creating small probe objects, until they pass or time out.
"""

from __future__ import annotations

import time
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ResourceProvider, UpdateResult

from trainer_infra.core.objects import ReadinessGate

POLL_SECONDS = 3.0


def _client(kubeconfig: str | None, context: str | None) -> Any:
    # Imported when the gate runs, not when the program loads: the engine runs this provider after
    # unpickling it, and the Kubernetes client costs most of a second to import on every render.
    import yaml
    from kubernetes import client, config

    if kubeconfig:
        api = config.new_client_from_config_dict(yaml.safe_load(kubeconfig), context=context)
    else:
        api = config.new_client_from_config(context=context)
    return client, api


def _established(client: Any, api: Any, name: str) -> bool:
    try:
        crd = client.ApiextensionsV1Api(api).read_custom_resource_definition(name)
    except client.ApiException:
        return False
    return any(c.type == "Established" and c.status == "True" for c in (crd.status.conditions or []))


def _probe(client: Any, api: Any, obj: dict[str, Any]) -> str | None:
    """None when the webhook answered the dry-run create; otherwise why not."""
    group, _, version = obj["apiVersion"].rpartition("/")
    plural = obj["kind"].lower() + "s"
    custom = client.CustomObjectsApi(api)
    ns = obj["metadata"].get("namespace")
    try:
        if ns:
            custom.create_namespaced_custom_object(group, version, ns, plural, obj, dry_run="All")
        else:
            custom.create_cluster_custom_object(group, version, plural, obj, dry_run="All")
    except client.ApiException as exc:
        if exc.status == 409:  # AlreadyExists: admission ran before the conflict was found
            return None
        return f"{obj['kind']} dry-run: HTTP {exc.status} {str(exc.body)[:300]}"
    return None


def wait_ready(inputs: dict[str, Any]) -> None:
    client, api = _client(inputs.get("kubeconfig"), inputs.get("context"))
    deadline = time.monotonic() + float(inputs["timeoutSeconds"])
    last = "not checked yet"
    while time.monotonic() < deadline:
        missing = [c for c in inputs["crds"] if not _established(client, api, c)]
        if missing:
            last = f"CRDs not Established: {', '.join(missing)}"
        else:
            failures = [f for f in (_probe(client, api, p) for p in inputs["probes"]) if f]
            if not failures:
                return
            last = "; ".join(failures)
        time.sleep(POLL_SECONDS)
    hint = f"; {inputs['hint']}" if inputs.get("hint") else ""
    raise TimeoutError(
        f"{inputs['component']} {inputs['version']} not ready after {inputs['timeoutSeconds']}s: {last}{hint}"
    )


class _GateProvider(ResourceProvider):
    def create(self, props: dict[str, Any]) -> CreateResult:
        wait_ready(props)
        return CreateResult(id_=f"{props['component']}-{props['version']}", outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        keys = ("component", "version", "crds", "probes", "release")
        changed = [k for k in keys if olds.get(k) != news.get(k)]
        return DiffResult(changes=bool(changed), replaces=[], delete_before_replace=False)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        wait_ready(news)
        return UpdateResult(outs=news)


class ReadinessGateResource(pulumi.dynamic.Resource):
    def __init__(
        self,
        gate: ReadinessGate,
        kubeconfig: pulumi.Input[str] | None,
        context: str | None,
        opts: pulumi.ResourceOptions,
    ) -> None:
        props = {
            "component": gate.component,
            "version": gate.version,
            "release": gate.release,
            "crds": list(gate.crds),
            "probes": list(gate.probes),
            "timeoutSeconds": gate.timeout_seconds,
            "hint": gate.hint,
            "kubeconfig": kubeconfig,
            "context": context,
        }
        super().__init__(_GateProvider(), gate.name, props, opts)
