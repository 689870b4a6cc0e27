"""Properties of the derived queueing setup over random pool/team layouts (hypothesis).

Checked against the rendered objects themselves (kwok Nodes included), not the config arithmetic:
what Kueue and the scheduler would see."""

from __future__ import annotations

import math
from collections import defaultdict
from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes.utils import parse_quantity

from tests.conformance import Conformance
from tests.helpers import crd_versions
from tests.pools_helpers import stack
from tests.queues.test_placement import runtime
from trainer_infra.catalog.injections import apply_injections
from trainer_infra.core.quantity import quantity
from trainer_infra.stack.build import build_plan
from trainer_infra.stack.validate import validate

HOST = "kubernetes.io/hostname"
TOPOLOGIES = [
    ["trainer-platform.io/block", "trainer-platform.io/rack", HOST],
    ["example.com/zone", HOST],
    [HOST],
]
ANNOTATIONS = ("kueue.x-k8s.io/podset-required-topology", "kueue.x-k8s.io/podset-preferred-topology")


@st.composite
def layouts(draw: st.DrawFn) -> dict[str, Any]:
    pools: list[dict[str, Any]] = []
    for i in range(draw(st.integers(1, 3))):
        topology = draw(st.sampled_from(TOPOLOGIES))
        layout = [draw(st.integers(1, 3)) for _ in topology]
        gpus = draw(st.sampled_from([0, 1, 3, 4, 8]))
        node: dict[str, Any] = {
            "cpu": draw(st.sampled_from(["8", "96", "7500m"])),
            "memory": draw(st.sampled_from(["64Gi", "10Gi", "1000M"])),
        }
        if gpus:
            node["accelerator"] = {"count": gpus, "resource": draw(st.sampled_from(["nvidia.com/gpu", "amd.com/gpu"]))}
        pools.append(
            {"name": f"p{i}", "backend": "kwok", "node": node, "topology": topology, "kwok": {"layout": layout}}
        )
    n_teams = draw(st.integers(0, 4))
    teams: list[dict[str, Any]] = []
    for t in range(n_teams):
        quota: dict[str, Any] = {}
        for pool in pools:
            nodes = math.prod(pool["kwok"]["layout"])
            if draw(st.booleans()):
                acc = pool["node"].get("accelerator")
                if acc:
                    quota[pool["name"]] = {"gpus": draw(st.integers(0, nodes * acc["count"] // n_teams))}
                else:
                    quota[pool["name"]] = {"cpu": str(draw(st.integers(0, nodes * 7 // n_teams)))}
        teams.append({"name": f"team-{t}", "namespace": f"ns-{t}", "localQueue": f"q{t}", "quota": quota})
    common = set.intersection(*(set(p["topology"]) for p in pools))
    level = draw(st.sampled_from(sorted(common)))
    short = draw(st.booleans())
    mode = draw(st.sampled_from(["required", "preferred"]))
    placement = {"default": {mode: level.rsplit("/", 1)[-1] if short else level}}
    return stack(pools, teams, queues={"placement": placement})


def _objects(raw: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    plan = build_plan(validate(raw))
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for o in plan.objects:
        out[o.manifest["kind"]].append(o.manifest)
    return out


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _tolerates(tolerations: list[dict[str, str]], taint: dict[str, str]) -> bool:
    return any(
        t["key"] == taint["key"]
        and t["effect"] == taint["effect"]
        and (t["operator"] == "Exists" or t.get("value") == taint.get("value"))
        for t in tolerations
    )


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layouts())
def test_queue_setup_is_consistent_with_the_nodes(raw: dict[str, Any]) -> None:
    objs = _objects(raw)
    nodes = objs["Node"]
    topologies = {t["metadata"]["name"]: [lv["nodeLabel"] for lv in t["spec"]["levels"]] for t in objs["Topology"]}
    flavors = {f["metadata"]["name"]: f for f in objs["ResourceFlavor"]}
    by_pool = {f["metadata"]["labels"]["trainer-platform.io/node-pool"]: f for f in flavors.values()}
    for pool in raw["nodePools"]:
        flavor = by_pool[pool["name"]]["spec"]
        selected = [n for n in nodes if _matches(flavor["nodeLabels"], n["metadata"]["labels"])]
        own = [n for n in nodes if n["metadata"]["name"].startswith(pool["name"] + "-")]
        assert selected == own and len(own) == math.prod(pool["kwok"]["layout"])
        for node in own:
            assert all(_tolerates(flavor.get("tolerations", []), taint) for taint in node["spec"]["taints"])
            assert all(key in node["metadata"]["labels"] for key in topologies[flavor["topologyName"]])
    # Every flavor lists resources in exactly the coveredResources order.
    for cq in objs["ClusterQueue"]:
        for group in cq["spec"]["resourceGroups"]:
            for flavor in group["flavors"]:
                assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]
    # Every LocalQueue points to an existing ClusterQueue that admits its namespace.
    queues = {cq["metadata"]["name"]: cq for cq in objs["ClusterQueue"]}
    assert len(objs["LocalQueue"]) == len(raw["teams"])
    for lq in objs["LocalQueue"]:
        cq = queues[lq["spec"]["clusterQueue"]]
        ns_labels = {"kubernetes.io/metadata.name": lq["metadata"]["namespace"]}
        assert _matches(cq["spec"]["namespaceSelector"]["matchLabels"], ns_labels)
    # Nominal quotas per flavor fit in what the flavor's nodes offer (allocatable of the rendered Nodes).
    quota: dict[tuple[str, str], Decimal] = defaultdict(Decimal)
    for cq in objs["ClusterQueue"]:
        for flavor in cq["spec"]["resourceGroups"][0]["flavors"]:
            for r in flavor["resources"]:
                quota[(flavor["name"], r["name"])] += parse_quantity(r["nominalQuota"])
    for (flavor_name, res), total in quota.items():
        selector = flavors[flavor_name]["spec"]["nodeLabels"]
        offered = sum(
            (
                parse_quantity(n["status"]["allocatable"].get(res, "0"))
                for n in nodes
                if _matches(selector, n["metadata"]["labels"])
            ),
            Decimal(0),
        )
        assert total <= offered, (flavor_name, res, total, offered)
    # TAS annotations name a level of the topology of every flavor the runtime may run on.
    rt = apply_injections(validate(raw).serve.facts, runtime("any-runtime"))
    node_job = rt["spec"]["template"]["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]
    [(mode, level)] = node_job["metadata"]["annotations"].items()
    assert mode in ANNOTATIONS
    assert all(level in topologies[f["spec"]["topologyName"]] for f in flavors.values())


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layouts())
def test_random_queue_setups_pass_kueue_schemas_and_cel(raw: dict[str, Any]) -> None:
    v = validate(raw)
    checker = Conformance(v.config.kubernetes.version, crd_versions(v))
    objs = [o.manifest for o in build_plan(v).objects if o.manifest["kind"] != "Node"]
    assert checker.check_all(objs) == []


@given(st.from_regex(r"\A[+-]?(\d{1,6}(\.\d{0,3})?|\.\d{1,3})([eE][+-]?\d|[numkMGTPE]|[KMGTPE]i)?\Z"))
@settings(max_examples=200)
def test_quantity_parsing_agrees_with_the_kubernetes_client(text: str) -> None:
    assert quantity(text) == parse_quantity(text)
