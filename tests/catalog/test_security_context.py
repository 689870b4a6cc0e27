"""Every non-MPI runtime, as served (all injections), passes Pod Security `restricted` for every pod, so a
`restricted` team can run the catalog: initializers included, judged by the port of the API server's checks
(trainer_infra/manifests/pod_security_standards.py);
and the pods carry what a kubelet needs to start upstream root images as another user (explicit uid, a
writable HOME and working directory) for the SDK's command to run. Whether the images then really run (file
permissions inside them, a team claim writable by that uid) needs real containers: kwok runs none, so that is
not verified here (docs/teams.md#pod-security). The e2e admits these pods through the real PodSecurity admission.
"""

from __future__ import annotations

import re
import shlex
from functools import cache
from typing import Any

import pytest
from kubeflow.trainer import CustomTrainer

from tests.catalog.test_catalog_plan import DATA_CACHE_ON
from tests.helpers import MINIMAL, plan_of, stack_raw
from tests.sdk_harness import FakeCluster, sdk_against
from trainer_infra.catalog.security_context import HOME, WORKSPACE, is_mpi
from trainer_infra.components.settings import deep_merge
from trainer_infra.manifests.pod_security_standards import restricted_problems
from trainer_infra.manifests.pod_walk import containers
from trainer_infra.manifests.runtime import is_training, pod_spec, pod_specs, replicated_jobs

NON_MPI = {
    "jax-distributed",
    "torch-distributed",
    "torch-distributed-with-cache",
    "torchtune-llama3.2-1b",
    "torchtune-llama3.2-3b",
    "torchtune-qwen2.5-1.5b",
    "xgboost-distributed",
}
STACKS = {
    # team claim at /workspace, every injection, the data cache on
    "local": deep_merge(stack_raw("local"), DATA_CACHE_ON),
    # no storage: torchtune's per-TrainJob claims, the trainer's scratch workspace
    "bare": {**MINIMAL, "dataCache": {"enabled": True}},
}


@cache
def served(stack: str) -> dict[str, dict[str, Any]]:
    plan = plan_of(STACKS[stack])
    return {o.manifest["metadata"]["name"]: o.manifest for o in plan.objects if o.manifest["kind"].endswith("Runtime")}


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_every_runtime_passes_restricted_and_mpi_keeps_its_user_with_net_bind_service_for_sshd(stack: str) -> None:
    runtimes = served(stack)
    assert {n for n, r in runtimes.items() if not is_mpi(r)} == NON_MPI
    for name, runtime in runtimes.items():
        for where, pod in pod_specs(runtime):
            assert restricted_problems(pod) == [], (name, where)
    for name in ("deepspeed-distributed", "mlx-distributed"):
        for where, pod in pod_specs(runtimes[name]):
            assert "fsGroup" not in pod["securityContext"], (name, where)  # would make the ssh key group-readable
            for c in pod["containers"]:
                sshd = c.get("command") == ["/usr/sbin/sshd"]
                caps = {"drop": ["ALL"], **({"add": ["NET_BIND_SERVICE"]} if sshd else {})}
                assert c["securityContext"]["capabilities"] == caps, (name, where, c["name"])
                assert c["securityContext"]["runAsUser"] == 1000, (name, where)  # the image's mpiuser
                assert all(e["name"] != "HOME" for e in c.get("env") or []), (name, where)


def _volume(pod: dict[str, Any], name: str) -> dict[str, Any]:
    return next(v for v in pod.get("volumes") or [] if v["name"] == name)


def _writable(runtime: dict[str, Any], pod: dict[str, Any], container: dict[str, Any], path: str) -> str:
    """The kind of the volume mounted at `path` (a per-TrainJob claim template counts as a claim)."""
    mount = next((m for m in container.get("volumeMounts") or [] if m["mountPath"].rstrip("/") == path), None)
    assert mount is not None, f"nothing mounted at {path} in {container['name']}"
    templates = {
        t["metadata"]["name"]
        for p in runtime["spec"]["template"]["spec"].get("volumeClaimPolicies") or []
        for t in p["templates"]
    }
    if mount["name"] in templates:
        return "persistentVolumeClaim"
    return next(k for k in _volume(pod, mount["name"]) if k != "name")


@pytest.mark.parametrize("stack", sorted(STACKS))
def test_pods_start_as_a_non_root_user_with_a_writable_home_and_workspace(stack: str) -> None:
    """Kubelet refuses `runAsNonRoot` for an image whose user is root unless runAsUser names another uid; the
    SDK's `pip install --user` writes under $HOME, its script and log into the working directory (/workspace)."""
    for name in sorted(NON_MPI):
        runtime = served(stack)[name]
        for job in replicated_jobs(runtime):
            pod = pod_spec(job)
            sc = pod["securityContext"]
            assert sc["runAsUser"] > 0 and sc["runAsGroup"] > 0 and sc["fsGroup"] == sc["runAsGroup"], name
            for _, c in containers(pod):
                assert (c.get("securityContext") or {}).get("runAsUser", sc["runAsUser"]) != 0
                home = {e["name"]: e.get("value") for e in c["env"]}["HOME"]
                assert home == HOME and _writable(runtime, pod, c, home) == "emptyDir", (name, c["name"])
                if is_training(job):
                    expected = {"persistentVolumeClaim"} if stack == "local" or "torchtune" in name else {"emptyDir"}
                    assert {_writable(runtime, pod, c, WORKSPACE)} == expected, (stack, name)


def test_the_sdk_command_writes_only_into_home_and_the_working_directory() -> None:
    """What the kubeflow SDK's generated command writes, read from the command itself: the pip log and the
    function file are relative paths (the working directory) and packages go to `--user` (HOME)."""
    runtimes = served("bare")
    cluster = FakeCluster(list(runtimes.values()))

    def train() -> None:
        print("training")

    with sdk_against(cluster) as sdk:
        trainer = CustomTrainer(func=train, packages_to_install=["numpy"])
        sdk.train(runtime=sdk.get_runtime("torch-distributed"), trainer=trainer)
    (_, _, body), *_ = cluster.created
    script = body["spec"]["trainer"]["command"][-1]
    assert "--user" in script
    log = re.search(r'LOG_FILE="([^"]+)"', script)
    written = re.search(r'> "([^"]+\.py)"', script)
    assert log and written, script
    for path in (log.group(1), written.group(1)):
        assert not shlex.split(path)[0].startswith("/"), f"the SDK now writes {path}: check the runtime's mounts"
