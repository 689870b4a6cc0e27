"""Karpenter's core with its kwok cloud provider (``sigs.k8s.io/karpenter`` ``./kwok``) as a process beside a
harness control plane: what the karpenter backend renders meets the real Karpenter, with a fake cloud whose only
instance types are the pool's, shaped as the machine table says.

The fake cloud creates Node objects annotated ``kwok.x-k8s.io/node: fake`` (kwok/cloudprovider/cloudprovider.go
``addKwokAnnotation``), the annotation the harness's kwok controller manages (nodepools/kwok.py
``KWOK_MANAGED_NODES``), so they turn Ready like the kwok backend's nodes. Karpenter is not something the platform
installs: it runs with the admin kubeconfig, as the cluster stack's Karpenter would run with its own chart's RBAC.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from trainer_infra.core.upstream import karpenter, kubernetes
from trainer_infra.nodepools.machines import machine_table
from trainer_infra.sandbox.controlplane import Sandbox
from trainer_infra.sandbox.probes import http_ok
from trainer_infra.sandbox.processes import Process, free_port, spawn, wait_process
from trainer_infra.sandbox.versions import module_dir

Obj = dict[str, Any]

#: The binary `trainer-infra sandbox build --only karpenter-kwok` builds (sandbox/build.py).
BINARY = "karpenter-kwok"
#: The CRDs Karpenter's kwok chart installs (kwok/charts/crds) and the kwok provider's node class
#: (kwok/apis/crds), from the core module at the pinned version.
CRD_FOLDERS = ("kwok/charts/crds", "kwok/apis/crds")
#: The zone of every fake offering (the kwok provider's own instance types use `test-zone-a`).
FAKE_ZONE = "test-zone-a"


def crd_files() -> list[Path]:
    """Karpenter's CRDs (NodePool, NodeClaim, NodeOverlay, CapacityBuffer, KWOKNodeClass) of the pinned module."""
    root = module_dir(karpenter.CORE_MODULE, karpenter.CORE_VERSION, karpenter.CORE_TOOLCHAIN)
    files = [path for folder in CRD_FOLDERS for path in sorted((root / folder).glob("*.yaml"))]
    if not files:
        raise FileNotFoundError(f"no CRDs in {root}/{{{','.join(CRD_FOLDERS)}}}")
    return files


def on_kwok(objects: list[Obj]) -> list[Obj]:
    """The render's objects for a cluster whose Karpenter has the kwok provider: each NodePool's ``nodeClassRef``
    points at a ``KWOKNodeClass`` of the same name (created here), nothing else of it changes; the AWS node
    classes, which no kwok Karpenter reads, are left out."""
    out: list[Obj] = []
    classes: set[str] = set()
    for obj in objects:
        if obj["apiVersion"] == karpenter.EC2_NODECLASS_API:
            continue
        if obj["apiVersion"] == karpenter.NODEPOOL_API:
            obj = copy.deepcopy(obj)
            ref = obj["spec"]["template"]["spec"]["nodeClassRef"]
            ref.update(group=karpenter.KWOK_GROUP, kind=karpenter.KWOK_NODECLASS_KIND)
            classes.add(ref["name"])
        out.append(obj)
    for name in sorted(classes):
        out.append(
            {
                "apiVersion": karpenter.KWOK_NODECLASS_API,
                "kind": karpenter.KWOK_NODECLASS_KIND,
                "metadata": {"name": name},
            }
        )
    return out


def node_class_disk(node_class: Obj) -> str:
    """The ephemeral-storage Karpenter's AWS provider reports for nodes of an EC2NodeClass: its `rootVolume`
    mapping's size, else the provider's default volume (v1.15.2 pkg/providers/instancetype/types.go
    ``ephemeralStorage``; the platform's node classes always mark one, nodepools/karpenter.py)."""
    mappings = node_class.get("spec", {}).get("blockDeviceMappings", [])
    root = [m["ebs"]["volumeSize"] for m in mappings if m.get("rootVolume") and "volumeSize" in m.get("ebs", {})]
    return root[0] if root else karpenter.DEFAULT_NODE_DISK


def instance_types(names: list[str], capacity_types: list[str], disk: str) -> list[Obj]:
    """The fake cloud's catalogue (kwok/cloudprovider/helpers.go ``InstanceTypeOptions``): each EC2 instance type
    with the capacity the eks machine table gives it (vCPUs, memory, GPUs, max pods: what EC2 publishes and
    Karpenter's AWS provider reports as capacity) and `disk`, what that provider reports for the rendered node class
    (``node_class_disk``), offered in every capacity type asked for. Karpenter
    compares NodePool limits with this capacity; the kwok provider's allocatable is it minus 100m CPU and 10Mi.
    Without a disk no team pod fits: each requests ephemeral-storage (tenancy/ephemeral_storage.py), and
    Karpenter reports "no instance type has enough resources"."""
    table = machine_table("eks")
    out: list[Obj] = []
    for name in names:
        machine = table.get(name)
        if machine is None:
            raise KeyError(f"{name} is not in the eks machine table (nodepools/machine_types/eks.yaml)")
        facts = machine.facts
        resources = {
            "cpu": str(facts.vcpu),
            "memory": f"{facts.memory_gib}Gi",
            "pods": str(facts.max_pods),
            kubernetes.EPHEMERAL_STORAGE: disk,
        }
        if facts.gpu is not None:
            resources[facts.gpu.resource] = str(facts.gpu.count)
        offerings = [
            {
                "Price": 1.0,
                "Available": True,
                "Requirements": [
                    {"key": karpenter.CAPACITY_TYPE_LABEL, "operator": "In", "values": [capacity_type]},
                    {"key": kubernetes.ZONE_LABEL, "operator": "In", "values": [FAKE_ZONE]},
                ],
            }
            for capacity_type in capacity_types
        ]
        out.append(
            {
                "name": name,
                "offerings": offerings,
                "architecture": "amd64",
                "operatingSystems": ["linux"],
                "resources": resources,
            }
        )
    return out


def start(sandbox: Sandbox, catalogue: list[Obj]) -> Process:
    """Install Karpenter's CRDs and start Karpenter (kwok provider) against ``sandbox``; return once healthy.

    Settings are Karpenter's environment variables (pkg/operator/options/options.go ``AddFlags``;
    kwok/options/options.go for the instance types file). It runs as one replica outside the cluster: no leader
    election. The process is stopped with the sandbox.
    """
    sandbox.apply_crds(crd_files())
    config = sandbox.workdir / "config" / "karpenter-instance-types.json"
    config.write_text(json.dumps(catalogue, indent=2))
    health, metrics = free_port(), free_port()
    env = {
        "DISABLE_LEADER_ELECTION": "true",
        "HEALTH_PROBE_PORT": str(health),
        "METRICS_PORT": str(metrics),
        "INSTANCE_TYPES_FILE_PATH": str(config),
        "LOG_LEVEL": "debug",
        # consolidation decisions are made within seconds of what happens in the test, not Karpenter's batch window
        "BATCH_IDLE_DURATION": "1s",
        "BATCH_MAX_DURATION": "5s",
    }
    env["KUBECONFIG"] = str(sandbox.kubeconfig)
    log = sandbox.workdir / "logs" / f"{BINARY}.log"
    proc = spawn("karpenter", karpenter.CORE_VERSION, sandbox.bin_dir / BINARY, [], log, sandbox.workdir, env)
    sandbox.processes.append(proc)  # stopped with the sandbox
    wait_process(proc, "Karpenter /readyz", lambda: http_ok(f"http://127.0.0.1:{health}/readyz"))
    return proc
