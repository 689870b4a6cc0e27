"""The team file service as rendered: the claim mounted read-only, no token, non-root; members `get` its proxy in
their own namespace and nothing more (no write through it, no other team's, no edit of its code or Deployment);
its pods pass the team pod rules only as the Deployment's; off, it leaves nothing behind."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.helpers import plan_of, stack_raw
from tests.tenancy import cel_admission
from tests.tenancy.rbac_eval import Authorizer, Identity, Request, request_from_http
from trainer_infra.core.errors import ConfigError
from trainer_infra.core.upstream import python
from trainer_infra.stack.validate import validate
from trainer_infra.storage import files
from trainer_infra.tenancy.admission.policy import policy_name

Obj = dict[str, Any]
MIRROR = "mirror.corp:5000/k8s"
ALICE = Identity("alice@example.com", ("system:authenticated",))  # a member of nlp in the local stack


def _raw(**storage_files: Any) -> Obj:
    raw = stack_raw("local")
    raw["images"] = {"registryMirror": MIRROR}
    if storage_files:
        raw["storage"]["files"] = storage_files
    return raw


@pytest.fixture(scope="module")
def objects() -> list[Obj]:
    return [o.manifest for o in plan_of(_raw()).objects]


def _one(objects: list[Obj], kind: str, namespace: str | None = "nlp", name: str = files.NAME) -> Obj:
    return next(
        o
        for o in objects
        if o["kind"] == kind and o["metadata"]["name"] == name and o["metadata"].get("namespace") == namespace
    )


def test_the_claim_is_mounted_read_only_by_a_non_root_pod_without_a_token(objects: list[Obj]) -> None:
    spec = _one(objects, "Deployment")["spec"]["template"]["spec"]
    assert spec["automountServiceAccountToken"] is False
    assert "serviceAccountName" not in spec
    assert spec["securityContext"]["runAsNonRoot"] is True and spec["securityContext"]["runAsUser"] == 1000
    claim = next(v for v in spec["volumes"] if "persistentVolumeClaim" in v)
    assert claim["persistentVolumeClaim"] == {"claimName": "workspace", "readOnly": True}
    (container,) = spec["containers"]
    assert all(m["readOnly"] is True for m in container["volumeMounts"])
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
    }
    assert container["image"] == f"{MIRROR}/{python.IMAGE}"
    code = _one(objects, "ConfigMap")["data"][files.SERVER_FILE]
    assert code == files.server_code() and "def main(" in code
    service = _one(objects, "Service")
    assert service["spec"]["type"] == "ClusterIP" and service["spec"]["selector"] == files.POD_LABELS
    assert {v["name"] for v in spec["volumes"]} == {files.CLAIM_VOLUME, files.CODE_VOLUME}


def test_every_team_gets_one(objects: list[Obj]) -> None:
    kinds = {(o["kind"], o["metadata"].get("namespace")) for o in objects if o["metadata"]["name"] == files.NAME}
    assert kinds == {(k, ns) for k in ("ConfigMap", "Deployment", "Service") for ns in ("nlp", "vision")}


PROXY = "/api/v1/namespaces/{ns}/services/{name}/proxy/jobs/train-1/model.pt"


def test_a_member_reads_through_the_proxy_of_their_own_team_only(objects: list[Obj]) -> None:
    authz = Authorizer(objects)
    own = PROXY.format(ns="nlp", name=files.NAME)
    assert authz.allowed(ALICE, request_from_http("GET", own))
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        assert not authz.allowed(ALICE, request_from_http(method, own)), method
    assert not authz.allowed(ALICE, request_from_http("GET", PROXY.format(ns="vision", name=files.NAME)))
    # another Service of the team, or the same one named with a port, is not this one resource name
    assert not authz.allowed(ALICE, request_from_http("GET", PROXY.format(ns="nlp", name="other")))
    assert not authz.allowed(ALICE, request_from_http("GET", PROXY.format(ns="nlp", name=f"{files.NAME}:8080")))
    # the pods behind it, and their proxy, stay closed
    assert not authz.allowed(ALICE, Request("get", "", "pods/proxy", "nlp", "x"))


@pytest.mark.parametrize(
    ("group", "resource"),
    [("", "configmaps"), ("apps", "deployments"), ("apps", "replicasets"), ("", "pods"), ("", "services")],
)
def test_a_member_cannot_change_the_server(objects: list[Obj], group: str, resource: str) -> None:
    authz = Authorizer(objects)
    for verb in ("create", "update", "patch", "delete"):
        assert not authz.allowed(ALICE, Request(verb, group, resource, "nlp", files.NAME)), (verb, resource)


def _pod_as_created(objects: list[Obj], owner: Obj | None) -> Obj:
    """The Deployment's pod as the ReplicaSet controller creates it (`owner`: its ownerReference)."""
    template = copy.deepcopy(_one(objects, "Deployment")["spec"]["template"])
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {**template["metadata"]}, "spec": template["spec"]}
    pod["metadata"]["generateName"] = f"{files.NAME}-5d8f7c9b4-"
    if owner is not None:
        pod["metadata"]["ownerReferences"] = [owner]
    return pod


OWNER = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{files.NAME}-5d8f7c9b4", "controller": True}


def _pod_refusals(objects: list[Obj], pod: Obj, namespace: str) -> list[str]:
    policy = _one(objects, "ValidatingAdmissionPolicy", None, policy_name("Pod"))
    ns = _one(objects, "Namespace", None, namespace)
    return cel_admission.refusals(
        policy,
        pod,
        namespace=namespace,
        namespace_annotations=ns["metadata"].get("annotations", {}),
        namespace_labels=ns["metadata"].get("labels", {}),
        user="system:serviceaccount:kube-system:replicaset-controller",
        resource="pods",
    )


@pytest.mark.parametrize("namespace", ["nlp", "vision"])
def test_its_pod_passes_the_team_pod_rules_as_the_deployments_only(objects: list[Obj], namespace: str) -> None:
    assert _pod_refusals(objects, _pod_as_created(objects, OWNER), namespace) == []
    # the same pod without the ReplicaSet, or a ReplicaSet of another name: a pod that would run uncharged
    assert any("part of a job" in r for r in _pod_refusals(objects, _pod_as_created(objects, None), namespace))
    other = {**OWNER, "name": "miner-5d8f7c9b4"}
    assert any("part of a job" in r for r in _pod_refusals(objects, _pod_as_created(objects, other), namespace))


def test_off_leaves_no_server_no_proxy_right_and_no_extra_platform_image() -> None:
    objects = [o.manifest for o in plan_of(_raw(enabled=False)).objects]
    assert not [o for o in objects if o["metadata"]["name"] == files.NAME]
    assert not Authorizer(objects).allowed(ALICE, request_from_http("GET", PROXY.format(ns="nlp", name=files.NAME)))
    assert python.IMAGE not in str(_one(objects, "ValidatingAdmissionPolicy", None, policy_name("Pod")))


def test_its_pods_go_where_the_node_selector_says() -> None:
    objects = [o.manifest for o in plan_of(_raw(nodeSelector={"pool": "system"})).objects]
    assert _one(objects, "Deployment")["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "system"}


def test_an_unknown_key_is_an_error() -> None:
    with pytest.raises(ConfigError) as err:
        validate(_raw(enabled=True, writable=True))
    assert "storage.files" in str(err.value) and "writable" in str(err.value)


def test_api_server_sources_open_its_port_to_those_only() -> None:
    raw = _raw()
    raw["tenancy"] = {**raw.get("tenancy", {}), "networkPolicies": {"apiServerSources": ["172.16.0.0/28"]}}
    objects = [o.manifest for o in plan_of(raw).objects]
    policy = _one(objects, "NetworkPolicy", "nlp", "trainer-platform-files")
    assert policy["spec"] == {
        "podSelector": {"matchLabels": files.POD_LABELS},
        "policyTypes": ["Ingress"],
        "ingress": [{"from": [{"ipBlock": {"cidr": "172.16.0.0/28"}}], "ports": [{"protocol": "TCP", "port": 8080}]}],
    }
    # by default no pod reaches it: no policy names its pods
    default = [o.manifest for o in plan_of(_raw()).objects]
    assert not [o for o in default if o["kind"] == "NetworkPolicy" and "files" in o["metadata"]["name"]]


def test_the_team_quota_stays_the_teams_own_beside_the_server() -> None:
    """A job sized to the admin's ResourceQuota still gets its pods: the server's share comes on top (on the real
    install, 2 × 64Gi beside the server's 32Mi were refused under a quota of 128Gi)."""
    raw = _raw()
    raw["teams"][0]["resourceQuota"] = {
        "hard": {
            "requests.cpu": "32",
            "requests.memory": "128Gi",
            "limits.memory": "1Ti",
            "pods": "200",
            "requests.nvidia.com/gpu": "8",
        }
    }
    quota = _one([o.manifest for o in plan_of(raw).objects], "ResourceQuota", name="trainer-platform-team")
    pod = _one([o.manifest for o in plan_of(raw).objects], "Deployment")["spec"]["template"]["spec"]
    asks = pod["containers"][0]["resources"]
    assert asks["requests"]["memory"] == "32Mi" and asks["limits"]["memory"] == "128Mi"
    assert quota["spec"]["hard"] == {
        "requests.nvidia.com/gpu": "8",  # nothing the server counts under: as written
        "limits.memory": "1048704Mi",  # 1Ti + 128Mi
        "pods": "201",
        "requests.cpu": "32010m",
        "requests.memory": "131104Mi",  # 128Gi + 32Mi
    }
    raw["storage"]["files"] = {"enabled": False}
    quota = _one([o.manifest for o in plan_of(raw).objects], "ResourceQuota", name="trainer-platform-team")
    assert quota["spec"]["hard"]["requests.memory"] == "128Gi" and quota["spec"]["hard"]["pods"] == "200"
