"""The `local` render applied to the sandbox, as the scenarios and attacks see it: teams, queues, helpers.

Shared by the install session's scenario files (fixtures `platform`, `clean_teams` in conftest.py).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from trainer_infra.core.upstream import kubernetes
from trainer_infra.manifests.runtime import JOBSET_NAME_LABEL
from trainer_infra.sandbox.kube import KubeClient, wait_for
from trainer_infra.sandbox.render import RenderOutput
from trainer_infra.storage import files

Obj = dict[str, Any]
TJ = ("trainer.kubeflow.org/v1alpha1", "TrainJob")
WL = ("kueue.x-k8s.io/v1beta2", "Workload")
CQ = ("kueue.x-k8s.io/v1beta2", "ClusterQueue")
GPU = "nvidia.com/gpu"


@dataclass(frozen=True)
class Team:
    """A team as a data scientist meets it: namespace, identity, queue, and what its runtime asks for."""

    namespace: str
    user: str
    groups: tuple[str, ...]
    queue: str
    runtime: str
    pool_label: tuple[str, str]
    topology_label: str | None
    source: str


@dataclass
class Platform:
    """The render of the `local` stack, applied."""

    render: RenderOutput
    objects: list[Obj]

    def runtimes(self) -> list[Obj]:
        return [o for o in self.objects if o["kind"] == "ClusterTrainingRuntime"]

    def render_teams(self) -> list[Team]:
        """Teams found in the render: a RoleBinding to a User in a namespace with a LocalQueue."""
        teams: list[Team] = []
        runtime = next(
            (r for r in self.render.of_kind("ClusterTrainingRuntime") if r["metadata"]["name"] == "torch-distributed"),
            None,
        )
        if runtime is None:
            return teams
        node_job = next(j for j in runtime["spec"]["template"]["spec"]["replicatedJobs"] if j["name"] == "node")
        annotations = node_job["template"]["spec"]["template"].get("metadata", {}).get("annotations", {})
        topology = annotations.get("kueue.x-k8s.io/podset-required-topology")
        for lq in self.render.of_kind("LocalQueue"):
            ns = lq["metadata"]["namespace"]
            members = [
                s
                for rb in self.render.of_kind("RoleBinding")
                if rb["metadata"].get("namespace") == ns and rb["roleRef"]["name"].endswith("team-member")
                for s in rb["subjects"]
            ]
            users = [s["name"] for s in members if s["kind"] == "User"]
            groups = tuple(s["name"] for s in members if s["kind"] == "Group")
            cq = next(
                c for c in self.render.of_kind("ClusterQueue") if c["metadata"]["name"] == lq["spec"]["clusterQueue"]
            )
            flavor_name = cq["spec"]["resourceGroups"][0]["flavors"][0]["name"]
            flavor = next(f for f in self.render.of_kind("ResourceFlavor") if f["metadata"]["name"] == flavor_name)
            pool = next(iter(flavor["spec"]["nodeLabels"].items()))
            if users:
                teams.append(
                    Team(
                        ns,
                        users[0],
                        groups,
                        lq["metadata"]["name"],
                        "torch-distributed",
                        pool,
                        topology,
                        "render of stack local",
                    )
                )
        return teams

    def teams(self) -> list[Team]:
        """The render's teams; the scenarios need two (one to act, one to be kept out or lend)."""
        found = self.render_teams()
        assert len(found) >= 2, "render of stack local has fewer than two teams with a member and a LocalQueue"
        return found

    def cluster_queue(self, team: Team) -> Obj:
        """The rendered ClusterQueue behind a team's LocalQueue."""
        lq = next(
            q
            for q in self.render.of_kind("LocalQueue")
            if q["metadata"]["namespace"] == team.namespace and q["metadata"]["name"] == team.queue
        )
        return next(
            c for c in self.render.of_kind("ClusterQueue") if c["metadata"]["name"] == lq["spec"]["clusterQueue"]
        )

    def gpus_per_node(self) -> int:
        """GPUs of one rendered kwok node (a pod asking for all of them takes a whole node)."""
        counts = {
            int(n["status"]["allocatable"][GPU])
            for n in self.render.of_kind("Node")
            if GPU in n["status"]["allocatable"]
        }
        assert len(counts) == 1, f"the scenarios assume one GPU node shape, render has {counts}"
        return counts.pop()

    def nodes_per_domain(self, label: str) -> int:
        """Nodes in the smallest topology domain ``label`` (the most pods a required-topology podset may have)."""
        domains: dict[str, int] = {}
        for n in self.render.of_kind("Node"):
            domain = n["metadata"]["labels"][label]
            domains[domain] = domains.get(domain, 0) + 1
        return min(domains.values())


def gpu_quota(cq: Obj) -> Obj:
    """The GPU resource entry (nominalQuota, lendingLimit, borrowingLimit) of a ClusterQueue's only flavor."""
    (flavor,) = [f for g in cq["spec"]["resourceGroups"] for f in g["flavors"]]
    return next(r for r in flavor["resources"] if r["name"] == GPU)


def jobset_pods(client: KubeClient, ns: str, jobset: str) -> list[Obj]:
    """The pods of one JobSet (a TrainJob's JobSet has the TrainJob's name)."""
    return client.list("v1", "Pod", ns, label_selector=f"{JOBSET_NAME_LABEL}={jobset}")


def node_ready(node: Obj) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in node.get("status", {}).get("conditions", []))


def has_condition(obj: Obj, kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True" for c in obj.get("status", {}).get("conditions", []))


def workload_of(client: KubeClient, ns: str, trainjob: str) -> Obj | None:
    """Kueue's Workload owned by a TrainJob (None until Kueue creates it)."""
    for wl in client.list(*WL, ns):
        owners = wl["metadata"].get("ownerReferences", [])
        if any(o.get("kind") == "TrainJob" and o.get("name") == trainjob for o in owners):
            return wl
    return None


def admitted(client: KubeClient, ns: str, trainjob: str) -> Obj | None:
    wl = workload_of(client, ns, trainjob)
    return wl if wl is not None and has_condition(wl, "Admitted") else None


def wait_admitted(client: KubeClient, ns: str, trainjob: str, timeout: float, why: str = "") -> Obj:
    """Wait for admission; on timeout show the Workload's conditions (Kueue says why it waits)."""
    try:
        wl: Obj = wait_for(
            f"Kueue to admit TrainJob {ns}/{trainjob}{why}", lambda: admitted(client, ns, trainjob), timeout
        )
    except TimeoutError as exc:
        current = workload_of(client, ns, trainjob)
        conds = current.get("status", {}).get("conditions") if current else "no Workload"
        raise TimeoutError(f"{exc}; Workload conditions: {conds}") from None
    return wl


def describe_namespace(client: KubeClient, ns: str) -> str:
    """Pods, claims, Jobs and recent warning events of a namespace: what a failed wait needs to explain itself."""
    lines = []
    for pod in client.list("v1", "Pod", ns):
        conds = [(c["type"], c["status"], c.get("message", "")[:200]) for c in pod["status"].get("conditions", [])]
        lines.append(
            f"pod {pod['metadata']['name']}: {pod['status'].get('phase')} node={pod['spec'].get('nodeName')} "
            f"gates={pod['spec'].get('schedulingGates')} {conds}"
        )
    for pvc in client.list("v1", "PersistentVolumeClaim", ns):
        lines.append(f"pvc {pvc['metadata']['name']}: {pvc['status'].get('phase')}")
    for job in client.list("batch/v1", "Job", ns):
        lines.append(f"job {job['metadata']['name']}: {job.get('status', {}).get('conditions')}")
    for ev in client.list("v1", "Event", ns)[-15:]:
        if ev.get("type") == "Warning":
            lines.append(
                f"event {ev['involvedObject']['kind']}/{ev['involvedObject']['name']}: {ev['reason']}: "
                f"{ev.get('message', '')[:300]}"
            )
    return "\n".join(lines)


def delete_trainjobs(client: KubeClient, namespaces: tuple[str, ...] | list[str]) -> None:
    """Delete every TrainJob and wait until their Workloads and pods are gone (frees quota). The team's file
    service (``storage.files``: a Deployment of the platform's own in each team namespace) stays."""
    for ns in namespaces:
        for tj in client.list(*TJ, ns):
            client.delete(*TJ, tj["metadata"]["name"], ns)
    not_the_file_service = f"{kubernetes.APP_NAME}!={files.NAME}"

    def gone() -> bool:
        return all(
            not client.list(*TJ, ns)
            and not client.list(*WL, ns)
            and not client.list("v1", "Pod", ns, label_selector=not_the_file_service)
            for ns in namespaces
        )

    wait_for(f"TrainJobs, Workloads and pods in {namespaces} to be deleted", gone, 90)


def trainjob(
    name: str,
    ns: str,
    *,
    gpus: int,
    nodes: int,
    priority: str | None = None,
    runtime: str = "torch-distributed",
    queue: str | None = None,
    cpu: str = "4",
) -> Obj:
    labels = {"kueue.x-k8s.io/queue-name": queue or ns}
    if priority:
        labels["kueue.x-k8s.io/priority-class"] = priority
    return {
        "apiVersion": TJ[0],
        "kind": TJ[1],
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {
            "runtimeRef": {"name": runtime, "apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime"},
            "trainer": {
                "numNodes": nodes,
                "resourcesPerNode": {"limits": {GPU: str(gpus)}, "requests": {GPU: str(gpus), "cpu": cpu}},
            },
        },
    }


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:5]}"
