"""The karpenter backend's NodePool on the real Karpenter core (sigs.k8s.io/karpenter, kwok cloud provider).

The `local` stack with its GPU pool made a karpenter pool (p5.48xlarge, scaling 0..2) is rendered and applied to a
harness control plane (real API server, Kueue, JobSet, Trainer). The NodePool is applied as rendered except its
``nodeClassRef``, which names the kwok provider's ``KWOKNodeClass`` instead of the ``EC2NodeClass``, whose root
volume the fake cloud reports as each node's disk. A team member's TrainJob, each node's container asking for the
most disk a member may (tenancy.ephemeralStorage.max), is admitted through the team's queue; its pods wait for
nodes; Karpenter launches them with the pool's labels and taints, the pods run there; the job deleted, Karpenter
removes the empty nodes after the rendered ``consolidateAfter``. Opt-in (`make e2e-karpenter`): the Karpenter build
needs Go 1.27 (tests/e2e/README.md).
"""

from __future__ import annotations

import copy
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.platform import TJ, has_condition, node_ready, trainjob, unique, wait_admitted
from trainer_infra.core.upstream import karpenter, kubernetes
from trainer_infra.nodepools.machines import machine_table
from trainer_infra.sandbox import karpenter_kwok
from trainer_infra.sandbox.apply import apply_objects, bind_claims
from trainer_infra.sandbox.controlplane import Sandbox
from trainer_infra.sandbox.kube import KubeClient, wait_for
from trainer_infra.sandbox.processes import Process, wait_process
from trainer_infra.sandbox.render import check_versions, kueue_settings, render_stack
from trainer_infra.tenancy.ephemeral_storage import EphemeralStorageConfig

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.environ.get("E2E_KARPENTER") != "1", reason="opt-in: E2E_KARPENTER=1 (make e2e-karpenter)"),
]

Obj = dict[str, Any]
POOL, TEAM, MEMBER = "h100", "nlp", "alice@example.com"
INSTANCE = "p5.48xlarge"
NODES = 2  # the pool's size.max: the job needs both
CONSOLIDATE_AFTER = 20  # seconds, the pool's `karpenter.consolidateAfter`
NODEPOOL_LABEL = f"{karpenter.GROUP}/nodepool"  # what Karpenter labels its nodes with (pkg/apis/v1/labels.go)


def stack_keys() -> Obj:
    """The `local` stack's keys this test replaces: one karpenter GPU pool, one team with a quota on it."""
    machine = machine_table("eks").get(INSTANCE)
    assert machine is not None
    node = machine.shape.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {
        "nodePools": [
            {
                "name": POOL,
                "backend": "karpenter",
                "node": node,
                "size": {"max": NODES},
                "karpenter": {
                    "instanceTypes": [INSTANCE],
                    "consolidateAfter": f"{CONSOLIDATE_AFTER}s",
                    "nodeClass": {
                        "role": "KarpenterNodeRole-e2e",
                        "subnetTags": {"karpenter.sh/discovery": "e2e"},
                        "securityGroupTags": {"karpenter.sh/discovery": "e2e"},
                    },
                },
            }
        ],
        "components": {
            "kueue": {"trainJobIntegration": True, "tas": {"enabled": False}}
        },  # a karpenter pool under TAS is refused
        "queues": {},
        "dataCache": {"enabled": False},
        "teams": [{"name": TEAM, "quota": {POOL: {"gpus": 8 * NODES}}, "members": {"users": [MEMBER]}}],
    }


@contextmanager
def platform_with_karpenter(tmp_path: Path) -> Iterator[tuple[Sandbox, Process, Obj]]:
    """The render applied to a harness control plane with Karpenter (kwok provider) beside it; yields the sandbox,
    Karpenter's process and the rendered NodePool, once Karpenter reports the NodePool Ready."""
    render = render_stack("local", tmp_path / "render", stack_keys())
    rendered_pool = next(o for o in render.objects if o["kind"] == "NodePool")
    objects = karpenter_kwok.on_kwok(render.objects)
    kwok_pool = copy.deepcopy(next(o for o in objects if o["kind"] == "NodePool"))
    assert kwok_pool["spec"]["template"]["spec"]["nodeClassRef"] == {
        "group": karpenter.KWOK_GROUP,
        "kind": karpenter.KWOK_NODECLASS_KIND,
        "name": POOL,
    }
    kwok_pool["spec"]["template"]["spec"]["nodeClassRef"] = rendered_pool["spec"]["template"]["spec"]["nodeClassRef"]
    assert kwok_pool == rendered_pool, "only the node class reference may differ from the render"

    sb = Sandbox(tmp_path / "sb", kueue_settings=kueue_settings(render), helm_releases=render.helm_releases)
    with sb:
        check_versions(render, sb.versions)
        start = time.monotonic()
        disk = karpenter_kwok.node_class_disk(next(o for o in render.objects if o["kind"] == "EC2NodeClass"))
        proc = karpenter_kwok.start(sb, karpenter_kwok.instance_types([INSTANCE], ["on-demand"], disk))
        print(f"Karpenter {karpenter.CORE_VERSION} ready in {time.monotonic() - start:.1f} s")
        apply_objects(sb.client, objects)
        bind_claims(sb.client, [o for o in render.objects if o["kind"] == "PersistentVolumeClaim"])
        wait_process(
            proc,
            f"NodePool {POOL} to be Ready (its KWOKNodeClass resolved)",
            lambda: has_condition(sb.client.get(karpenter.NODEPOOL_API, "NodePool", POOL), "Ready"),
            90,
        )
        assert pool_nodes(sb.client) == [], "the pool scales from zero"
        yield sb, proc, rendered_pool


def unregistered(node: Obj) -> bool:
    """Karpenter's taint until it registers the node (pkg/apis/v1/taints.go ``UnregisteredNoExecuteTaint``)."""
    return any(t["key"] == f"{karpenter.GROUP}/unregistered" for t in node["spec"].get("taints", []))


def pool_nodes(client: KubeClient) -> list[Obj]:
    return [n for n in client.list("v1", "Node") if n["metadata"].get("labels", {}).get(NODEPOOL_LABEL) == POOL]


def progress(client: KubeClient) -> str:
    """Where Karpenter is: each NodeClaim's lifecycle conditions and each pool node's readiness and taints (what a
    timed-out wait shows)."""
    claims = [
        f"{c['metadata']['name']} "
        + ",".join(
            f"{k['type']}={k['status']}({k.get('reason', '')})" for k in c.get("status", {}).get("conditions", [])
        )
        for c in client.list(karpenter.NODEPOOL_API, "NodeClaim")
    ]
    nodes = [
        f"{n['metadata']['name']} ready={node_ready(n)} taints={[t['key'] for t in n['spec'].get('taints', [])]}"
        for n in pool_nodes(client)
    ]
    return f"NodeClaims: {claims}; nodes: {nodes}"


def test_karpenter_launches_the_pools_nodes_for_an_admitted_trainjob_and_removes_them(tmp_path: Path) -> None:
    # TAS admits only onto nodes that exist (Kueue 0.19.2): a pool scaling from zero works without it
    with platform_with_karpenter(tmp_path) as (sb, proc, rendered_pool):
        assert rendered_pool["spec"]["disruption"] == {
            "consolidationPolicy": "WhenEmpty",
            "consolidateAfter": f"{CONSOLIDATE_AFTER}s",
        }
        template = rendered_pool["spec"]["template"]
        admin = sb.client

        # a team member's job, through the team's queue
        name = unique("kp")
        member = sb.user_client(MEMBER)
        job = trainjob(name, TEAM, gpus=8, nodes=NODES, queue="default")
        # each node's container at the bound a member may ask for: Kueue admits it whatever the disk, and it gets
        # a node only because the node class's root volume holds it (the fake cloud reports the rendered size)
        resources = job["spec"]["trainer"]["resourcesPerNode"]
        for kind in ("requests", "limits"):
            resources[kind][kubernetes.EPHEMERAL_STORAGE] = EphemeralStorageConfig().max
        member.create(job)
        submitted = time.monotonic()
        wait_admitted(admin, TEAM, name, 120, " onto the karpenter pool's flavor (quota, no nodes yet)")

        def launched() -> list[Obj] | bool:
            # registered: Karpenter has swapped its `unregistered` taint for the NodeClaim's labels and taints
            nodes = [n for n in pool_nodes(admin) if node_ready(n) and not unregistered(n)]
            if len(nodes) != NODES:
                raise AssertionError(progress(admin))  # the last one is in the timeout's message
            return nodes

        nodes: list[Obj] = wait_process(proc, f"Karpenter to launch {NODES} Ready nodes of pool {POOL}", launched, 240)
        print(f"{NODES} nodes Ready {time.monotonic() - submitted:.1f} s after the TrainJob was created")
        for node in nodes:
            labels = node["metadata"]["labels"]
            assert template["metadata"]["labels"].items() <= labels.items(), labels
            assert labels["node.kubernetes.io/instance-type"] == INSTANCE
            assert labels[karpenter.CAPACITY_TYPE_LABEL] == "on-demand"
            taints = node["spec"].get("taints", [])
            for taint in template["spec"]["taints"]:
                assert taint in taints, taints
            assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
        names = {n["metadata"]["name"] for n in nodes}

        def running() -> list[Obj] | bool:
            pods = [p for p in admin.list("v1", "Pod", TEAM) if p["status"].get("phase") == "Running"]
            return pods if len(pods) == NODES else False

        pods: list[Obj] = wait_for(f"the TrainJob's {NODES} pods to run on the launched nodes", running, 120)
        assert {p["spec"]["nodeName"] for p in pods} == names, "one pod per launched node"
        assert len(admin.list(karpenter.NODEPOOL_API, "NodeClaim")) == NODES

        # the job gone, the empty nodes go after consolidateAfter
        admin.delete(*TJ, name, TEAM)
        wait_for("the TrainJob's pods to be gone", lambda: not admin.list("v1", "Pod", TEAM), 90)
        emptied = time.monotonic()
        wait_process(
            proc,
            f"Karpenter to remove the empty nodes (consolidateAfter {CONSOLIDATE_AFTER}s)",
            lambda: not pool_nodes(admin) and not admin.list(karpenter.NODEPOOL_API, "NodeClaim"),
            CONSOLIDATE_AFTER + 180,
        )
        removed = time.monotonic() - emptied
        print(f"nodes removed {removed:.1f} s after the pods were gone")
        assert removed >= CONSOLIDATE_AFTER - 5, "emptiness waits for consolidateAfter"
