"""A fleet stack (MultiKueue manager + workers) as a platform engineer relies on it: one program for every
cluster, clusters that cannot drift, least-privilege credentials that rotate in place, the manager's quota
derived from the workers, and bad input refused before anything is applied."""

from __future__ import annotations

import base64
import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conformance import Conformance
from tests.helpers import ROOT, crd_versions, plan_of
from tests.tenancy.cel_admission import refusals
from trainer_infra.core.errors import ConfigError
from trainer_infra.core.objects import CHART_TYPE, ManagedObject, WorkerKubeconfig
from trainer_infra.manifests.meta import LEAVING
from trainer_infra.platform.fleet_component import kubeconfig_text
from trainer_infra.program import deploy_fleet
from trainer_infra.render.capture import capture
from trainer_infra.render.enforce import check_rendered
from trainer_infra.render.output import Rendered
from trainer_infra.render.per_cluster import render_fleet
from trainer_infra.stack.fleet_plans import build_fleet, validate_fleet
from trainer_infra.stack.load import raw_from_stack_document
from trainer_infra.stack.validate import validate

STACK = Path(__file__).with_name("Pulumi.fleet.yaml")


def fleet_raw() -> dict[str, Any]:
    return raw_from_stack_document(yaml.safe_load(STACK.read_text()), str(STACK))


def changed(edit: Any) -> dict[str, Any]:
    raw = copy.deepcopy(fleet_raw())
    edit(raw)
    return raw


@pytest.fixture(scope="module")
def renders() -> dict[str, Rendered]:
    return render_fleet(build_fleet(validate_fleet(fleet_raw())), "fleet")


def objects(rendered: Rendered, kind: str) -> dict[str, dict[str, Any]]:
    return {
        f"{m['metadata'].get('namespace', '')}/{m['metadata']['name']}": m
        for m in rendered.manifests
        if m["kind"] == kind
    }


def issues_of(raw: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as err:
        build_fleet(validate_fleet(raw))
    return [(i.path, i.message) for i in err.value.issues]


def test_one_program_registers_every_cluster_with_its_own_provider() -> None:
    captured = capture(lambda: deploy_fleet(build_fleet(validate_fleet(fleet_raw()))), "fleet")
    providers = {r.name for r in captured.registrations if r.type == "pulumi:providers:kubernetes"}
    assert providers == {"manager-k8s", "east-k8s", "west-k8s"}
    for r in captured.registrations:
        if r.custom and r.type.startswith("kubernetes:") and "apiVersion" in r.inputs:
            cluster = r.name.split("-", 1)[0]
            assert r.provider.split("::")[-2] == f"{cluster}-k8s", r.name


def test_every_cluster_passes_schema_and_cel_conformance(renders: dict[str, Rendered]) -> None:
    vf = validate_fleet(fleet_raw())
    validated = {"manager": vf.manager, **{w.name: v for w, v in vf.workers}}
    assert sorted(renders) == ["east", "manager", "west"]
    for cluster, rendered in renders.items():
        v = validated[cluster]
        assert Conformance(v.config.kubernetes.version, crd_versions(v)).check_all(rendered.manifests) == []


def test_shared_objects_are_identical_on_every_cluster(renders: dict[str, Rendered]) -> None:
    """Namespaces, LocalQueues, team RBAC and priority classes come from one config: no drift possible."""
    for kind in ("Namespace", "LocalQueue", "WorkloadPriorityClass", "RoleBinding"):
        manager = {k: v for k, v in objects(renders["manager"], kind).items() if "multikueue" not in k}
        for worker in ("east", "west"):
            mine = {k: v for k, v in objects(renders[worker], kind).items() if "multikueue" not in k}
            assert {k: v for k, v in mine.items() if k in manager} == manager, (kind, worker)
            assert set(manager) <= set(mine)
    assert objects(renders["east"], "ClusterTrainingRuntime") == objects(renders["west"], "ClusterTrainingRuntime")
    assert set(objects(renders["manager"], "ClusterTrainingRuntime")) == set(
        objects(renders["east"], "ClusterTrainingRuntime")
    )


def test_a_worker_is_the_single_cluster_stack_plus_the_managers_identity() -> None:
    """Deriving a worker changes nothing a single-cluster stack with the same pools would get."""
    raw = fleet_raw()
    worker = raw["fleet"]["workers"][0]
    single = {k: v for k, v in raw.items() if k != "fleet"}
    single["kubernetes"] = {"version": "1.34"}
    single["nodePools"] = worker["nodePools"]
    alone = {o.key: o.manifest for o in plan_of(single).objects}
    east = {o.key: o.manifest for o in build_fleet(validate_fleet(raw)).plans["east"].objects}
    extra = set(east) - set(alone)
    assert set(alone) <= set(east)
    assert all(east[k] == alone[k] for k in alone)
    assert {east[k]["kind"] for k in extra} == {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Secret",
    }
    assert all("multikueue" in k for k in extra)


def test_manager_objects_join_the_workers(renders: dict[str, Rendered]) -> None:
    manager = renders["manager"]
    (check,) = objects(manager, "AdmissionCheck").values()
    assert check["spec"]["controllerName"] == "kueue.x-k8s.io/multikueue"
    params = check["spec"]["parameters"]
    (config,) = objects(manager, "MultiKueueConfig").values()
    assert params == {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": config["metadata"]["name"]}
    assert config["spec"]["clusters"] == ["east", "west"]  # preferred first, as listed
    secrets = objects(manager, "Secret")
    for name in ("east", "west"):
        source = objects(manager, "MultiKueueCluster")[f"/{name}"]["spec"]["clusterSource"]["kubeConfig"]
        assert source["locationType"] == "Secret"
        assert secrets[f"kueue-system/{source['location']}"]["stringData"] == {"kubeconfig": "<secret>"}
    for cq in objects(manager, "ClusterQueue").values():
        assert cq["spec"]["admissionChecksStrategy"] == {"admissionChecks": [{"name": "multikueue"}]}
    assert not objects(manager, "Node")  # the manager runs no jobs
    config_yaml = next(r for r in manager.releases if r["name"] == "kueue")["values"]["managerConfig"]
    mk = yaml.safe_load(config_yaml["controllerManagerConfigYaml"])["multiKueue"]
    assert mk == {"gcInterval": "1m", "origin": "multikueue", "workerLostTimeout": "2m"}


def _gpu(cq: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """flavor → the nvidia.com/gpu entry of a one-group ClusterQueue."""
    (group,) = cq["spec"]["resourceGroups"]
    return {f["name"]: next(r for r in f["resources"] if r["name"] == "nvidia.com/gpu") for f in group["flavors"]}


def _manager_cq(raw: dict[str, Any], name: str) -> dict[str, Any]:
    return next(
        o.manifest
        for o in build_fleet(validate_fleet(raw)).plans["manager"].objects
        if o.manifest["kind"] == "ClusterQueue" and o.manifest["metadata"]["name"] == name
    )


def test_manager_quota_mirrors_each_worker_or_its_cap(renders: dict[str, Rendered]) -> None:
    """One flavor per worker pool, each with the team's share there: the manager's total is the workers'
    sum, and (Kueue gives a pod set one flavor) a job must fit one worker to get manager quota."""
    manager, east = objects(renders["manager"], "ClusterQueue"), objects(renders["east"], "ClusterQueue")
    (east_gpu,) = _gpu(east["/nlp"]).values()
    assert east_gpu == {"name": "nvidia.com/gpu", "nominalQuota": "16", "lendingLimit": "8"}
    assert _gpu(manager["/nlp"]) == {"east.h100": east_gpu, "west.h100": east_gpu}
    assert {f: g["nominalQuota"] for f, g in _gpu(manager["/vision"]).items()} == {"east.h100": "8", "west.h100": "8"}
    flavors = objects(renders["manager"], "ResourceFlavor")
    assert sorted(flavors) == ["/east.h100", "/west.h100"]
    assert all(f["spec"] == {} for f in flavors.values())  # the manager runs no pods: plain flavors
    manager_cpu = [r for f in manager["/nlp"]["spec"]["resourceGroups"][0]["flavors"] for r in f["resources"]]
    east_cpu = next(r for r in east["/nlp"]["spec"]["resourceGroups"][0]["flavors"][0]["resources"])
    assert [r for r in manager_cpu if r["name"] == "cpu"] == [east_cpu, east_cpu]
    assert "admissionChecksStrategy" not in east["/nlp"]["spec"]  # workers admit locally

    capped = _manager_cq(changed(lambda r: r["fleet"].update(managerQuota={"cap": {"nvidia.com/gpu": 12}})), "nlp")
    assert {f: (g["nominalQuota"], g["lendingLimit"]) for f, g in _gpu(capped).items()} == {
        "east.h100": ("12", "8"),
        "west.h100": ("12", "8"),
    }


def test_a_draining_worker_holds_its_queues_and_leaves_the_managers_quota(renders: dict[str, Rendered]) -> None:
    """`draining: true` changes exactly: the worker's ClusterQueues (stopPolicy Hold), its flavors' quota on
    the manager (0), and the marks the removal policy reads. It stays in the MultiKueueConfig."""
    drained = render_fleet(build_fleet(validate_fleet(changed(_worker(0, draining=True)))), "fleet")
    # leaving the fleet later must make Pulumi forget the worker's objects, not delete them: all retained, none
    # protected (Pulumi would refuse to forget those and delete the rest), what was protected marked as leaving
    protected = {r["name"] for r in renders["east"].resources if r["protect"]}
    marked = [m for m in drained["east"].manifests if m["metadata"].get("annotations", {}).get(LEAVING) == "true"]
    leaving = [(m["kind"], m["metadata"].get("namespace"), m["metadata"]["name"]) for m in marked]
    assert {ManagedObject(m).key for m in marked} == protected and "namespace-nlp" in protected
    kept = {r["name"]: r for r in drained["east"].resources if r["type"].startswith("kubernetes:")}
    identity = {n for n in kept if "multikueue" in n}  # the manager's identity: deleted on removal
    assert len(identity) >= 4 and not any(kept[n]["retainOnDelete"] for n in identity)
    charts = [r for r in kept.values() if r["type"] == CHART_TYPE]  # their children: by the chart's transform
    crds = {"protect": False, "retainOnDelete": True, "leavingFleet": True}
    assert charts and all(r["childPolicy"]["CustomResourceDefinition"] == crds for r in charts)
    rest = [r for n, r in kept.items() if n not in identity and r["type"] != CHART_TYPE]
    assert all(r["retainOnDelete"] and not r["protect"] for r in rest), rest
    assert not check_rendered(drained["east"])  # the data-is-protected rule accepts the marks
    for cluster in ("manager", "east", "west"):
        before = {
            (m["kind"], m["metadata"].get("namespace"), m["metadata"]["name"]): m for m in renders[cluster].manifests
        }
        after = {
            (m["kind"], m["metadata"].get("namespace"), m["metadata"]["name"]): m for m in drained[cluster].manifests
        }
        assert set(before) == set(after), cluster
        changed_objects = sorted(k for k in before if before[k] != after[k])
        expected = {
            "west": [],
            "east": sorted([("ClusterQueue", None, "nlp"), ("ClusterQueue", None, "vision"), *leaving]),
            "manager": [
                ("ClusterQueue", None, "nlp"),
                ("ClusterQueue", None, "vision"),
                ("MultiKueueCluster", None, "east"),
                ("MultiKueueConfig", None, "fleet"),
            ],
        }[cluster]
        assert changed_objects == expected, cluster
    east = objects(drained["east"], "ClusterQueue")
    assert {cq["spec"]["stopPolicy"] for cq in east.values()} == {"Hold"}
    assert all("stopPolicy" not in cq["spec"] for cq in objects(drained["west"], "ClusterQueue").values())
    manager = objects(drained["manager"], "ClusterQueue")
    assert _gpu(manager["/nlp"])["east.h100"] == {"name": "nvidia.com/gpu", "nominalQuota": "0", "lendingLimit": "0"}
    assert _gpu(manager["/nlp"])["west.h100"]["nominalQuota"] == "16"
    (config,) = objects(drained["manager"], "MultiKueueConfig").values()
    assert config["spec"]["clusters"] == ["east", "west"]
    assert config["metadata"]["annotations"] == {"trainer-platform.io/draining": "east"}
    assert (
        objects(drained["manager"], "MultiKueueCluster")["/east"]["metadata"]["labels"]["trainer-platform.io/draining"]
        == "true"
    )


def _removal_policy(rendered: Rendered) -> dict[str, Any]:
    return objects(rendered, "ValidatingAdmissionPolicy")["/trainer-platform-fleet-drain-first"]


def test_a_worker_leaves_only_after_draining(renders: dict[str, Rendered]) -> None:
    """Removing a worker from the stack renders a MultiKueueConfig without it; the manager's API server
    refuses that update unless the stored config (the last `pulumi up`) marked the worker draining."""
    policy = _removal_policy(renders["manager"])
    bindings = objects(renders["manager"], "ValidatingAdmissionPolicyBinding")
    assert bindings["/trainer-platform-fleet-drain-first"]["spec"]["validationActions"] == ["Deny"]
    without_west = render_fleet(build_fleet(validate_fleet(changed(lambda r: r["fleet"]["workers"].pop(1)))), "fleet")
    assert sorted(without_west) == ["east", "manager"]
    (running,) = objects(renders["manager"], "MultiKueueConfig").values()
    (removed,) = objects(without_west["manager"], "MultiKueueConfig").values()
    assert removed["spec"]["clusters"] == ["east"]

    def update(new: dict[str, Any], old: dict[str, Any]) -> list[str]:
        return refusals(policy, new, namespace="", old=old, user="admin", resource="multikueueconfigs")

    (refused,) = update(removed, running)
    assert refused.startswith("worker(s) west removed from the fleet without draining first")
    # the team queues wait for that update: a refused `up` stops before they lose the worker's flavors
    queues = [r for r in renders["manager"].resources if r["name"].startswith("clusterqueue-")]
    assert queues and all("multikueueconfig-fleet" in r["dependsOn"] for r in queues)
    drained = render_fleet(build_fleet(validate_fleet(changed(_worker(1, draining=True)))), "fleet")
    (draining,) = objects(drained["manager"], "MultiKueueConfig").values()
    assert update(draining, running) == []  # marking it draining is an ordinary update
    assert update(removed, draining) == []  # then it may go
    three = changed(lambda r: r["fleet"]["workers"].append({**r["fleet"]["workers"][1], "name": "north"}))
    (added,) = objects(
        render_fleet(build_fleet(validate_fleet(three)), "fleet")["manager"], "MultiKueueConfig"
    ).values()
    assert update(added, running) == []  # adding never needs a drain

    def delete(cluster: dict[str, Any]) -> list[str]:
        return refusals(
            policy, {}, namespace="", old=cluster, user="admin", resource="multikueueclusters", operation="DELETE"
        )

    west = objects(renders["manager"], "MultiKueueCluster")["/west"]
    assert delete(west) == [
        "worker west is not draining: its running jobs would be evicted; set draining: true on "
        "the worker, pulumi up, wait until no job runs there, then remove it"
    ]
    assert delete(objects(drained["manager"], "MultiKueueCluster")["/west"]) == []
    foreign = {"metadata": {"name": "other", "labels": {}}}
    assert delete(foreign) == []  # clusters the stack does not manage are not its business


def test_removing_a_worker_is_refused_by_its_protected_namespaces(renders: dict[str, Rendered]) -> None:
    """Pulumi refuses to delete a protected resource: a worker dropped from the stack keeps its team
    namespaces (and the jobs and data in them) until someone unprotects them on purpose."""
    protected = {r["name"] for r in renders["west"].resources if r["protect"]}
    assert {"namespace-nlp", "namespace-vision"} <= protected


def test_worker_identity_is_least_privilege(renders: dict[str, Rendered]) -> None:
    east = renders["east"]
    (role,) = [m for k, m in objects(east, "ClusterRole").items() if "multikueue" in k]
    cluster_verbs = {v for rule in role["rules"] for v in rule["verbs"]}
    assert cluster_verbs <= {"get", "list", "watch"}  # nothing written outside team namespaces
    resources = {r for rule in role["rules"] for r in rule["resources"]}
    assert "trainjobs" in resources and "workloads" in resources
    assert not resources & {"secrets", "pods", "nodes", "namespaces", "configmaps"}
    roles = {k: m for k, m in objects(east, "Role").items() if "multikueue" in k}
    assert set(roles) == {"nlp/trainer-platform-multikueue", "vision/trainer-platform-multikueue"}
    for m in roles.values():
        for rule in m["rules"]:
            assert set(rule["verbs"]) <= {"create", "delete", "patch", "update"}
            assert "secrets" not in rule["resources"]
    bindings = {k: m for k, m in objects(east, "RoleBinding").items() if "multikueue" in k}
    assert {b["subjects"][0]["name"] for b in bindings.values()} == {"multikueue"}
    token = objects(east, "Secret")["kueue-system/multikueue-token-1"]
    assert token["type"] == "kubernetes.io/service-account-token"
    assert token["metadata"]["annotations"] == {"kubernetes.io/service-account.name": "multikueue"}


def test_only_enabled_integrations_are_granted() -> None:
    raw = changed(lambda r: r["components"]["kueue"].update(frameworks=["batch/job"]))
    east = build_fleet(validate_fleet(raw)).plans["east"]
    role = next(o.manifest for o in east.objects if o.key == "clusterrole-trainer-platform-multikueue")
    groups = {g for rule in role["rules"] for g in rule["apiGroups"]}
    assert groups == {"kueue.x-k8s.io", "trainer.kubeflow.org", "batch"}  # no jobset.x-k8s.io


def test_token_rotation_updates_the_managers_secret_in_place() -> None:
    before = render_fleet(build_fleet(validate_fleet(fleet_raw())), "fleet")
    rotated_raw = changed(lambda r: r["fleet"]["workers"][0].update(tokenGeneration=2))
    after = render_fleet(build_fleet(validate_fleet(rotated_raw)), "fleet")
    assert "kueue-system/multikueue-token-2" in objects(after["east"], "Secret")
    assert "kueue-system/multikueue-token-1" not in objects(after["east"], "Secret")
    assert objects(after["west"], "Secret") == objects(before["west"], "Secret")

    def secret_resource(r: Rendered) -> dict[str, Any]:
        return next(x for x in r.resources if x["name"] == "secret-kueue-system-multikueue-east")

    old, new = secret_resource(before["manager"]), secret_resource(after["manager"])
    # Same resource, same object: an update of its data, never a delete or replace.
    assert objects(after["manager"], "Secret") == objects(before["manager"], "Secret")
    assert not new["deleteBeforeReplace"] and "replaceOnChanges" not in new
    assert "east-secret-kueue-system-multikueue-token-1" in old["dependsOn"]
    assert "east-secret-kueue-system-multikueue-token-2" in new["dependsOn"]
    # the provider's default replaces (deletes, then creates) a Secret whose data changes: seen with the real
    # engine (tests/e2e/test_pulumi_fleet.py), where MultiKueue's Secret got a new UID at each rotation
    captured = capture(lambda: deploy_fleet(build_fleet(validate_fleet(rotated_raw))), "fleet")
    providers = [r for r in captured.registrations if r.type == "pulumi:providers:kubernetes"]
    assert providers and all(r.inputs.get("enableSecretMutable") in (True, "true") for r in providers), providers


def test_kubeconfig_is_built_from_the_worker_token() -> None:
    marker = WorkerKubeconfig("east", "secret-x", "https://east:6443", "east-multikueue")
    data = {"token": base64.b64encode(b"tok3n").decode(), "ca.crt": "Q0E="}
    config = yaml.safe_load(kubeconfig_text(marker, data))
    assert config["clusters"] == [
        {"name": "east", "cluster": {"server": "https://east:6443", "certificate-authority-data": "Q0E="}}
    ]
    assert config["users"] == [{"name": "east-multikueue", "user": {"token": "tok3n"}}]
    assert config["current-context"] == "east"


def test_secret_worker_kubeconfig_accepted_live_only_when_pulumi_holds_it_secret() -> None:
    raw = changed(lambda r: r["fleet"]["workers"][0].update(kubeconfig="apiVersion: v1\nkind: Config\n"))
    assert [p for p, _ in issues_of(raw)] == ["fleet.workers[0].kubeconfig"]  # plain text in the file
    with pytest.raises(ConfigError):
        validate_fleet(raw, secret_keys=frozenset({"teams"}))
    validate_fleet(raw, secret_keys=frozenset({"fleet", "kubernetes"}))
    # live, every value arrives decrypted: a worker kubeconfig Pulumi holds secret draws no plain-text warning,
    # also where the manager is reached by context alone (its `kubernetes` key then holds no secret)
    raw["kubernetes"].pop("kubeconfig")
    accepted = validate_fleet(raw, secret_keys=frozenset({"fleet"}))
    assert not [w for w in accepted.warnings if "plain text" in w], accepted.warnings


def _worker(i: int, **changes: Any) -> Any:
    return lambda r: r["fleet"]["workers"][i].update(changes)


BAD: list[tuple[str, Any, str, str]] = [
    (
        "no kubeconfig",
        lambda r: r["fleet"]["workers"][1].pop("kubeconfig"),
        "fleet.workers[1].kubeconfig",
        "needs a kubeconfig",
    ),
    ("duplicate name", _worker(1, name="east"), "fleet.workers[1].name", "duplicate cluster name"),
    ("manager as worker", _worker(0, name="manager"), "fleet.workers[0].name", "manager is listed as its own worker"),
    (
        "queue no worker serves",
        lambda r: r["teams"][1]["quota"].update({"a100": {"gpus": 8}}),
        "teams[1].quota.a100",
        "no worker can serve",
    ),
    (
        "runtime differs",
        lambda r: r["fleet"]["workers"][1]["nodePools"][0].update(
            taints=[{"key": "dedicated", "value": "west", "effect": "NoSchedule"}]
        ),
        "fleet.workers[1].nodePools",
        "would differ from the one on worker east",
    ),
    (
        "old trainer runs on the manager",
        lambda r: r["fleet"].update(managerTrainerController=True),
        "fleet.managerTrainerController",
        "ignores TrainJob spec.managedBy",
    ),
    (
        "more worker pools than a ClusterQueue has flavors",
        lambda r: r["fleet"].update(
            workers=[
                {
                    **r["fleet"]["workers"][0],
                    "name": f"w{i}",
                    "nodePools": [{**r["fleet"]["workers"][0]["nodePools"][0], "name": f"p{j}"} for j in range(4)],
                }
                for i in range(17)
            ]
        ),
        "fleet.workers",
        "one flavor per worker pool; Kueue allows 64",
    ),
    (
        "MultiKueue settings for a Kueue the stack does not install",
        lambda r: r.update(components={"kueue": {"install": False}}),
        "fleet.multiKueue",
        "this stack does not install Kueue",
    ),
    (
        "pools on the manager",
        lambda r: r.update(nodePools=r["fleet"]["workers"][0]["nodePools"]),
        "nodePools",
        "manager runs no training jobs",
    ),
    (
        "worker pool error keeps the worker's path",
        lambda r: r["fleet"]["workers"][0]["nodePools"][0].update(backend="nope"),
        "fleet.workers[0].nodePools[0].backend",
        "",
    ),
]


@pytest.mark.parametrize(("edit", "path", "message"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_fleet_input_names_the_path(edit: Any, path: str, message: str) -> None:
    found = issues_of(changed(edit))
    assert any(p == path and message in m for p, m in found), found


def test_a_fleet_stack_is_never_planned_as_one_cluster() -> None:
    with pytest.raises(ConfigError) as err:
        validate(fleet_raw())
    assert err.value.issues[0].path == "fleet"


def test_cli_refuses_bad_fleet_with_exit_2_and_writes_nothing(tmp_path: Path) -> None:
    doc = yaml.safe_load(STACK.read_text())
    doc["config"]["trainer-platform:fleet"]["workers"][1]["name"] = "east"
    stack = tmp_path / "Pulumi.bad.yaml"
    stack.write_text(yaml.safe_dump(doc))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "trainer_infra", "render", "--config-file", str(stack), "--out", str(out)]
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    assert result.returncode == 2, result.stderr
    assert "fleet.workers[1].name" in result.stderr and "Traceback" not in result.stderr
    assert not out.exists()


def test_cli_renders_each_cluster(tmp_path: Path) -> None:
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "trainer_infra", "render", "--config-file", str(STACK), "--out", str(out)]
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["east", "manager", "west"]
    assert (out / "manager" / "manifests.yaml").read_text() != (out / "east" / "manifests.yaml").read_text()


def test_team_stacks_are_refused_for_a_fleet() -> None:
    """A fleet is one program over every cluster; team stacks (docs/large-organisations.md) split one cluster."""
    assert ("teamShards", "team shards are not supported with a fleet") in issues_of(
        changed(lambda raw: raw.update(teamShards=4))
    )
