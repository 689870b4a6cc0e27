"""Every catalog runtime that can run on a CPU runs one real job on the real node (issue #28, items 4 and 5), on the
platform the real ``pulumi up`` installed (the sandbox session, tests/e2e/sandbox_session.py).

A team member (the kubeconfig sandbox.json names) creates a TrainJob of each runtime through the team's
LocalQueue; Kueue admits it onto the real node's flavor, Trainer's plugin for the runtime (XGBoost, JAX, MPI) wires
the pods together, and each assertion reads what the processes printed:
- ``xgboost-distributed``: 2 workers join the Rabit tracker that worker 0 runs at the address Trainer injects
  (``DMLC_*``), train one booster together (both end with the same model) and allreduce across each other;
- ``jax-distributed``: 2 processes form one ``jax.distributed`` cluster at Trainer's coordinator address, see 2
  processes and gather each other's values;
- ``deepspeed-distributed`` and ``mlx-distributed``: the launcher's ``mpirun`` starts rank 1 in the node pod over
  real SSH (the plugin's key Secret, the node pod's sshd as uid 1000 on port 2222; the launcher's ``ssh -v``
  shows the login), both ranks report from their own hosts and allreduce (mpi4py; MLX's MPI backend).

The images are CPU stand-ins built from Debian packages and PyPI wheels (the sandbox's runtime_images.py), published
under the catalog's exact references through ``images.registryMirror`` by ``make sandbox-up`` (sandbox.json
``runtimeImages``): what each runtime's command needs, not the upstream payload (no DeepSpeed or CUDA). Runtimes
that cannot run here are listed in ``CANNOT_RUN`` with the reason; a catalog runtime that is neither run nor listed
fails ``test_every_catalog_runtime_is_run_or_says_why``. Part of the sandbox session: ``E2E_SANDBOX=1`` as root
(``make e2e-sandbox``).
"""

from __future__ import annotations

import contextlib
import re
import textwrap
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.e2e.platform import unique
from tests.e2e.pods import RESTRICTED, labelled_pod, log_when_done, namespace
from tests.e2e.sandbox_session import SANDBOX_MARKS, Member, RunningSandbox
from trainer_infra.sandbox.kube import ApiError, KubeClient, wait_for
from trainer_infra.sandbox.node import MIRROR
from trainer_infra.sandbox.platform_sandbox import GPU, MPI_RUNTIMES, TRAINER_ID
from trainer_infra.sandbox.runtime_images import (
    JAX,
    MPI,
    MPI_PORT,
    MPI_UID,
    MPI_USER,
    XGBOOST,
    StandIn,
    digest_of,
    upstream_image,
)
from trainer_infra.sandbox.served_images import trainer_container
from trainer_infra.sandbox.versions import CHECKOUT

pytestmark = SANDBOX_MARKS

Obj = dict[str, Any]
TJ = "trainer.kubeflow.org/v1alpha1"
NUM_NODES = 2

#: the catalog: every runtime file
CATALOG = sorted(p.stem for p in (CHECKOUT / "runtimes").glob("*.yaml") if not p.name.startswith("_"))

#: runtimes this session cannot run, and why (each a concrete missing input, not a missing image)
CANNOT_RUN = {
    "torchtune-llama3.2-3b": "its model initializer downloads meta-llama/Llama-3.2-3B-Instruct from Hugging Face "
    "(gated weights, no hub reachable here) and its dataset initializer tatsu-lab/alpaca; `tune run` needs both",
    "torchtune-qwen2.5-1.5b": "its model initializer downloads Qwen/Qwen2.5-1.5B-Instruct from Hugging Face "
    "(no hub reachable here) and its dataset initializer tatsu-lab/alpaca; `tune run` needs both",
    "torch-distributed-with-cache": "needs the data cache: its dataset initializer starts the Trainer data-cache "
    "cluster (LeaderWorkerSet of the upstream Arrow Flight cache image) reading Iceberg tables through a cloud IAM "
    "role; neither the image's source nor a table store exists here (cache.py's objects are checked field for "
    "field in test_deputies.py instead)",
}
#: runtimes another file of this session runs
RUN_ELSEWHERE = {
    "torchtune-llama3.2-1b": "tests/e2e/test_sandbox_llm.py (its initializers download a tiny model and dataset from "
    "the sandbox's stand-in Hub with the team's token; the trainer step reads them: torchtune needs torch 2.x)",
    "torch-distributed": "tests/e2e/test_sandbox_up.py and test_sandbox_training.py (the SDK's train(), torchrun over "
    "gloo on 2 nodes, a checkpoint, a resume, an OOM)",
}


# -- what each runtime runs (a command per runtime; what it prints is asserted) ------------------------------

#: Trainer's DMLC_TRACKER_URI is worker 0's pod name, whose DNS record follows the pod's IP (see WAIT_FOR_HOSTS).
#: XGBoost 1.7's Rabit does not retry a name that does not resolve: it connects an empty address and fails at once
#: with `ReconnectLink … send: Broken pipe` (seen on the real node: both workers of both attempts, worker 0's pod
#: not resolvable yet). So each worker resolves the tracker's name, retrying, and hands Rabit the address; Rabit
#: retries connecting to it (DMLC_WORKER_CONNECT_RETRY: 10, 90 s) while worker 0 starts its tracker.
XGBOOST_SCRIPT = """
import hashlib, os, socket, time
import numpy as np, xgboost as xgb
from xgboost import collective
rank, world = int(os.environ["DMLC_TASK_ID"]), int(os.environ["DMLC_NUM_WORKER"])
uri, port = os.environ["DMLC_TRACKER_URI"], int(os.environ["DMLC_TRACKER_PORT"])
tracker = None
if rank == 0:  # the tracker runs where Trainer points every worker: worker 0's pod
    from xgboost.tracker import RabitTracker
    tracker = RabitTracker(host_ip="0.0.0.0", n_workers=world, port=port)
    tracker.start(world)
for waited in range(180):
    try:
        address = socket.getaddrinfo(uri, port, socket.AF_INET, socket.SOCK_STREAM)[0][4][0]
        break
    except socket.gaierror:
        time.sleep(1)
else:
    raise SystemExit(f"the tracker's name {uri} does not resolve")
with collective.CommunicatorContext(DMLC_TRACKER_URI=address, DMLC_TRACKER_PORT=port, DMLC_TASK_ID=str(rank),
                                    DMLC_WORKER_CONNECT_RETRY=10):
    total = collective.allreduce(np.array([rank + 1.0]), collective.Op.SUM)[0]
    rng = np.random.default_rng(rank)  # each worker its own rows
    x = rng.uniform(-1, 1, (256, 3))
    y = 3 * x[:, 0] - 2 * x[:, 1] + 0.5
    history = {}
    booster = xgb.train({"tree_method": "hist", "max_depth": 3}, xgb.DMatrix(x, y), 20,
                        evals=[(xgb.DMatrix(x, y), "train")], evals_result=history, verbose_eval=False)
    rmse = history["train"]["rmse"]
    model = hashlib.sha256(bytes(booster.save_raw("json"))).hexdigest()[:16]
    print(f"xgboost {xgb.__version__} worker {collective.get_rank()} of {collective.get_world_size()} "
          f"task {rank} uid {os.getuid()} allreduce {total:g} rmse {rmse[0]:.4f} -> {rmse[-1]:.4f} model {model} "
          f"tracker resolved after {waited} s", flush=True)
if tracker is not None:
    tracker.join()
"""
XGBOOST_LINE = re.compile(
    r"xgboost (\S+) worker (\d+) of (\d+) task (\d+) uid (\d+) allreduce (\S+) rmse (\S+) -> (\S+) model (\w+) "
    r"tracker resolved after (\d+) s"
)

JAX_SCRIPT = """
import os
import jax, jax.numpy as jnp
from jax.experimental import multihost_utils
jax.config.update("jax_cpu_collectives_implementation", "gloo")
jax.distributed.initialize(os.environ["JAX_COORDINATOR_ADDRESS"], int(os.environ["JAX_NUM_PROCESSES"]),
                           int(os.environ["JAX_PROCESS_ID"]))
gathered = multihost_utils.process_allgather(jnp.array([jax.process_index() + 1]))
print(f"jax {jax.__version__} process {jax.process_index()} of {jax.process_count()} devices {jax.device_count()} "
      f"gathered {sorted(int(v) for v in gathered.ravel())} uid {os.getuid()}", flush=True)
jax.distributed.shutdown()
"""
JAX_LINE = re.compile(r"jax (\S+) process (\d+) of (\d+) devices (\d+) gathered \[([\d, ]+)\] uid (\d+)")

#: the identity each rank's process holds: the subject and pod of the ServiceAccount token the kubelet projected
#: into its pod (the claims of the JWT, read by the process), or ``none`` -- who acts for the member in the
#: launcher, the pod that logs into the other pods
TOKEN_OF = (
    "import base64, json\n"
    "def token():\n"
    "    try:\n"
    "        part = open('/var/run/secrets/kubernetes.io/serviceaccount/token').read().split('.')[1]\n"
    "    except FileNotFoundError:\n"
    "        return 'none pod none'\n"
    "    claims = json.loads(base64.urlsafe_b64decode(part + '=' * (-len(part) % 4)))\n"
    "    return f\"{claims['sub']} pod {claims['kubernetes.io']['pod']['name']}\"\n"
)
MPI4PY_SCRIPT = TOKEN_OF + (
    "import os, socket; from mpi4py import MPI; c = MPI.COMM_WORLD; "
    "print(f'mpi rank {c.rank} of {c.size} host {socket.gethostname()} uid {os.getuid()} "
    "allreduce {c.allreduce(c.rank + 1)} token {token()}', flush=True)"
)
MLX_SCRIPT = TOKEN_OF + (
    "import os, socket; import mlx.core as mx; g = mx.distributed.init(strict=True, backend='mpi'); "
    "s = mx.distributed.all_sum(mx.array([g.rank() + 1.0]), group=g); "
    "print(f'mpi rank {g.rank()} of {g.size()} host {socket.gethostname()} uid {os.getuid()} "
    "allreduce {int(s.item())} token {token()}', flush=True)"
)
MPI_LINE = re.compile(r"mpi rank (\d+) of (\d+) host (\S+) uid (\d+) allreduce (\d+) token (\S+) pod (\S+)")


#: the launcher starts its command at once, as its pod starts: before the node pods' sshd listens and before the
#: hostfile's names resolve. A pod's DNS record follows its IP (the kubelet starts the containers, then reports the IP;
#: the EndpointSlice controller, then CoreDNS, follow); ssh and mpirun look a name up once (seen on the real node:
#: `ssh: Could not resolve hostname …-node-0-0.…: Temporary failure in name resolution` — the sandbox's CoreDNS has no
#: upstream, so a name not (yet) in the cluster ends in SERVFAIL, not NXDOMAIN — and mpirun, not knowing its own name,
#: ssh'ing to itself). So the launcher runs the command docs/data-scientists.md recommends, the one that runs here:
#: it resolves every host of the plugin's hostfile, retrying, waits for each other host's sshd and hands mpirun a
#: hostfile of those addresses (mpirun tells its own from its interfaces'; its daemons connect back by address).
DOCS_MPIRUN = "exec mpirun -n 2 python3 train.py"


def _documented_launcher() -> str:
    """The docs' launcher script, its ``mpirun`` line replaced by the case's own (``"$@"``)."""
    blocks = re.findall(r"```yaml\n(.*?)```", (CHECKOUT / "docs" / "data-scientists.md").read_text(), re.S)
    block = next(b for b in blocks if "OMPI_MCA_orte_default_hostfile" in b)
    script = textwrap.dedent(block.split("- |\n", 1)[1])
    assert script.rstrip().endswith(DOCS_MPIRUN) and f"/{MPI_PORT}" in script, script
    return script.rstrip().removesuffix(DOCS_MPIRUN) + 'exec "$@"\n'


WAIT_FOR_HOSTS = _documented_launcher()
#: the plugin's ssh arguments (``OMPI_MCA_plm_rsh_args``) and ``-v``: the launcher's ssh client logs how it logged
#: in (the node pods' own sshd log goes with them: JobSet deletes them once the launcher is done)
RSH_ARGS = "-o ConnectionAttempts=10 -v"


def _mpirun(script: str) -> list[str]:
    """The launcher's command: one rank per host of the plugin's hostfile (``OMPI_MCA_orte_default_hostfile``,
    the launcher itself first, ``runLauncherAsNode``), the remote one started through ssh."""
    mpirun = ["mpirun", "--mca", "plm_rsh_args", RSH_ARGS, "--tag-output", "-n", str(NUM_NODES)]
    mpirun += ["python3", "-c", script]
    return ["bash", "-c", WAIT_FOR_HOSTS, "wait-for-hosts", *mpirun]


@dataclass(frozen=True)
class Case:
    runtime: str
    stand_in: StandIn
    command: list[str]
    check: Callable[[dict[str, str], Obj, dict[str, Obj]], None]

    @property
    def mpi(self) -> bool:
        """The sandbox stack serves the MPI runtimes as TrainingRuntimes of its first team (the team's own
        runtimes), the others cluster-wide; every job runs in that `restricted` team."""
        return self.runtime in MPI_RUNTIMES


def _check_xgboost(logs: dict[str, str], job: Obj, pods: dict[str, Obj]) -> None:
    lines = [m for log in logs.values() for m in XGBOOST_LINE.findall(log)]
    assert len(lines) == NUM_NODES, logs
    workers = {int(w) for _, w, *_ in lines}
    assert workers == set(range(NUM_NODES)), lines
    for _, _, world, _, uid, total, first, last, _, _ in lines:
        assert int(world) == NUM_NODES and int(uid) == TRAINER_ID, lines
        assert float(total) == sum(range(1, NUM_NODES + 1)), lines  # every worker's value reached every worker
        assert float(last) < float(first) / 4, lines  # the shared booster fits
    assert len({model for *_, model, _ in lines}) == 1, lines  # one model, trained together


def _check_jax(logs: dict[str, str], job: Obj, pods: dict[str, Obj]) -> None:
    lines = [m for log in logs.values() for m in JAX_LINE.findall(log)]
    assert len(lines) == NUM_NODES, logs
    assert {int(p) for _, p, *_ in lines} == set(range(NUM_NODES)), lines
    for _, _, count, devices, gathered, uid in lines:
        assert int(count) == NUM_NODES and int(devices) >= NUM_NODES and int(uid) == TRAINER_ID, lines
        assert [int(v) for v in gathered.split(",")] == list(range(1, NUM_NODES + 1)), lines


def _check_mpi(logs: dict[str, str], job: Obj, pods: dict[str, Obj]) -> None:
    name = job["metadata"]["name"]
    # the launcher of the attempt that ran (a restarted JobSet leaves the failed attempt's pods in ``logs``)
    launchers = [log for pod, log in logs.items() if "-launcher-" in pod]
    launcher = max(launchers, key=lambda log: len(MPI_LINE.findall(log)))
    lines = MPI_LINE.findall(launcher)
    assert len(lines) == NUM_NODES, logs
    assert {int(r) for r, *_ in lines} == set(range(NUM_NODES)), lines
    hosts = {host for _, _, host, *_ in lines}
    # rank 0 in the launcher pod (runLauncherAsNode), rank 1 in the node pod, started there through its sshd
    assert hosts == {f"{name}-launcher-0-0", f"{name}-node-0-0"}, lines
    namespace = job["metadata"]["namespace"]
    for _, size, host, uid, total, subject, bound_to in lines:
        assert int(size) == NUM_NODES and int(uid) == MPI_UID, lines
        assert int(total) == sum(range(1, NUM_NODES + 1)), lines
        # the launcher (which logs into the node pods) and the node pods act as nobody but the namespace's
        # `default` account, bound to their own pod: the token test_sandbox_attacks.py takes out of a job's pod
        # and finds may do nothing its member may not (or none at all)
        assert (subject, bound_to) == ("none", "none") or (
            subject == f"system:serviceaccount:{namespace}:default" and bound_to.startswith(f"{host}-")
        ), lines
    # under `restricted`: every container drops ALL; the node pods' sshd adds back NET_BIND_SERVICE, nothing else
    for pod_name, pod in pods.items():
        for c in pod["spec"]["containers"]:
            sc = c["securityContext"]
            sshd = "-node-0-" in pod_name
            assert sc["capabilities"] == {"drop": ["ALL"], **({"add": ["NET_BIND_SERVICE"]} if sshd else {})}, sc
            assert sc["allowPrivilegeEscalation"] is False, sc
    # the launcher's ssh client met a node pod's sshd (its host key, port 2222) at the address the launcher resolved
    # (its hostfile of addresses) and logged in with the plugin's key
    nodes = "|".join(re.escape(p["status"]["podIP"]) for n, p in pods.items() if n.startswith(f"{name}-node-0-0-"))
    assert re.search(rf"Permanently added '\[({nodes})\]:{MPI_PORT}'", launcher), launcher
    assert re.search(rf"Authenticating to ({nodes}):{MPI_PORT} as '{MPI_USER}'", launcher), launcher
    assert re.search(rf'Authenticated to ({nodes}) \(\[({nodes})\]:{MPI_PORT}\) using "publickey"', launcher), launcher


CASES = {
    "xgboost-distributed": Case("xgboost-distributed", XGBOOST, ["python3", "-c", XGBOOST_SCRIPT], _check_xgboost),
    "jax-distributed": Case("jax-distributed", JAX, ["python3", "-c", JAX_SCRIPT], _check_jax),
    "deepspeed-distributed": Case("deepspeed-distributed", MPI, _mpirun(MPI4PY_SCRIPT), _check_mpi),
    "mlx-distributed": Case("mlx-distributed", MPI, _mpirun(MLX_SCRIPT), _check_mpi),
}


def test_every_catalog_runtime_is_run_or_says_why() -> None:
    """A runtime added to the catalog must be run here (or by another node file) or say why it cannot."""
    accounted = [*CASES, *CANNOT_RUN, *RUN_ELSEWHERE]
    assert sorted(accounted) == CATALOG, f"run, or list with a reason in CANNOT_RUN: {set(CATALOG) ^ set(accounted)}"


# -- the runs --------------------------------------------------------------------------------------------------


def _seen(admin: KubeClient, ns: str, name: str, pods: dict[str, Obj], logs: dict[str, str]) -> Obj | None:
    """The TrainJob once it completed or failed. Meanwhile its pods and their logs, as last seen: JobSet deletes
    the pods still running when the job is done (the MPI node pods' sshd), and a failed attempt's on restart."""
    for pod in admin.list("v1", "Pod", ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}"):
        if pod.get("status", {}).get("phase") in ("Running", "Succeeded", "Failed"):
            pods[pod["metadata"]["name"]] = pod
            with contextlib.suppress(ApiError):
                log = admin.log(pod["metadata"]["name"], ns)
                if not log.startswith("unable to retrieve container logs"):  # the container is gone already
                    logs[pod["metadata"]["name"]] = log
    job = admin.get(TJ, "TrainJob", name, ns)
    done = [c for c in job.get("status", {}).get("conditions", []) if c["type"] in ("Complete", "Failed")]
    return job if any(c["status"] == "True" for c in done) else None


def _trainjob(name: str, team: Member, runtime: str, kind: str, command: list[str]) -> Obj:
    return {
        "apiVersion": TJ,
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": team.namespace, "labels": {"kueue.x-k8s.io/queue-name": team.queue}},
        "spec": {
            "runtimeRef": {"name": runtime, "apiGroup": "trainer.kubeflow.org", "kind": kind},
            "trainer": {
                "numNodes": NUM_NODES,
                "command": command,
                "resourcesPerNode": {
                    "requests": {GPU: "1", "cpu": "250m", "memory": "1Gi"},
                    "limits": {GPU: "1", "memory": "2Gi"},
                },
            },
        },
    }


@pytest.mark.parametrize("runtime", CATALOG)
def test_runtime_runs_a_real_job(runtime: str, platform_sandbox: RunningSandbox) -> None:
    if runtime in CANNOT_RUN:
        pytest.skip(f"{runtime} cannot run here: {CANNOT_RUN[runtime]}")
    if runtime in RUN_ELSEWHERE:
        pytest.skip(f"{runtime} runs in {RUN_ELSEWHERE[runtime]}")
    case = CASES[runtime]
    sb = platform_sandbox
    admin = sb.admin
    team = sb.member(0)
    namespace = admin.get("v1", "Namespace", team.namespace)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    # the runtime as `pulumi up` installed it: the team's own (MPI) or the cluster's
    installed = (
        admin.get("trainer.kubeflow.org/v1alpha1", "TrainingRuntime", runtime, team.namespace)
        if case.mpi
        else admin.get("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime", runtime)
    )
    kind = installed["kind"]
    mirrored = trainer_container(installed)["image"]
    upstream = mirrored.removeprefix(f"{MIRROR}/")  # the catalog's reference, ${TRAINER_VERSION} filled in
    assert runtime in case.stand_in.runtimes
    assert re.fullmatch(re.escape(upstream_image(runtime)).replace(r"\$\{TRAINER_VERSION\}", r"[\w.-]+"), upstream)
    # the sandbox serves the stand-in under that exact reference
    assert sb.doc["runtimeImages"].get(mirrored) == digest_of(case.stand_in), (mirrored, sb.doc["runtimeImages"])

    name = unique(runtime.split("-")[0])
    member = team.client()
    start = time.monotonic()
    member.create(_trainjob(name, team, runtime, kind, case.command))
    pods: dict[str, Obj] = {}
    logs: dict[str, str] = {}
    job = wait_for(
        f"TrainJob {team.namespace}/{name} to finish",
        lambda: _seen(admin, team.namespace, name, pods, logs),
        600,
        1,
    )
    sb.times[f"{runtime} TrainJob created → finished"] = round(time.monotonic() - start, 1)
    _seen(admin, team.namespace, name, pods, logs)  # the last lines
    for pod_name, log in sorted(logs.items()):
        print(f"\n[node runtimes] log of {pod_name}:\n{log}", flush=True)
    conditions = {c["type"]: c["status"] for c in job["status"]["conditions"]}
    assert conditions.get("Complete") == "True", (job["status"], logs)

    # admitted through the team's queue; every pod on the real node, from the mirror's image
    workloads = admin.list("kueue.x-k8s.io/v1beta2", "Workload", team.namespace)
    wl = next(w for w in workloads if any(o["name"] == name for o in w["metadata"].get("ownerReferences", [])))
    cq = admin.get("kueue.x-k8s.io/v1beta2", "LocalQueue", team.queue, team.namespace)["spec"]["clusterQueue"]
    assert wl["status"]["admission"]["clusterQueue"] == cq, wl["status"]
    # every attempt's pods (the stack's failure policy restarts a failed JobSet once: at load ≈ 36 one JAX attempt
    # failed before printing anything, its cause gone with its pods); the assertions below read the one that passed
    assert pods and len(pods) % NUM_NODES == 0, sorted(pods)
    sb.times[f"{runtime} attempts"] = len(pods) // NUM_NODES
    for pod in pods.values():
        assert pod["spec"]["nodeName"] == sb.node
        sb.assert_ran_from_mirror(pod)
    case.check(logs, job, pods)


# -- MPI under `restricted` (docs/teams.md#pod-security) ---------------------------------------------------------

#: sshd started as the MPI runtimes start it, but only to print its version: whether the kernel lets it start
SSHD_PROBE = '/usr/sbin/sshd -V 2>&1; echo "sshd exit $?"; getpcaps $$ 2>/dev/null || grep Cap /proc/self/status'


def test_upstream_sshd_starts_under_restricted_only_with_net_bind_service(platform_sandbox: RunningSandbox) -> None:
    """Why the MPI runtimes' sshd adds back NET_BIND_SERVICE under `restricted`, measured: upstream's MPI images
    (and the stand-in) give sshd that file capability. With `capabilities.drop: [ALL]` (restricted) the
    container's bounding set lacks it and the kernel refuses to execute sshd (EPERM, exit 126): no MPI job could
    start. With NET_BIND_SERVICE added back (which `restricted` allows, and the platform's pod rule `privileged`
    allows as its only capability) and `allowPrivilegeEscalation: false`, sshd executes (no_new_privs keeps the
    capability from being granted: port 2222 needs none)."""
    sb = platform_sandbox
    admin = sb.admin
    mpi = admin.get("trainer.kubeflow.org/v1alpha1", "TrainingRuntime", MPI_RUNTIMES[0], sb.member(0).namespace)
    image = trainer_container(mpi)["image"]
    assert sb.doc["runtimeImages"].get(image) == digest_of(MPI), (image, sb.doc["runtimeImages"])
    # a probe namespace of the admin's (the platform's team namespaces admit only queued workloads)
    ns = "mpi-restricted"
    namespace(admin, ns, RESTRICTED)
    toleration = [{"operator": "Exists"}]
    logs = {}
    for name, add in (("drop-all", []), ("net-bind-service", ["NET_BIND_SERVICE"])):
        pod = labelled_pod(name, ns, sb.node, image, SSHD_PROBE, {}, tolerations=toleration)
        pod["spec"]["securityContext"]["runAsUser"] = MPI_UID
        if add:
            pod["spec"]["containers"][0]["securityContext"]["capabilities"]["add"] = add
        admin.create(pod)  # the real PodSecurity admission admits both: restricted allows NET_BIND_SERVICE
        logs[name] = log_when_done(admin, name, ns)
        print(f"\n[node runtimes] {name}:\n{logs[name]}", flush=True)
    assert "sshd exit 126" in logs["drop-all"] and "Operation not permitted" in logs["drop-all"], logs
    assert "OpenSSH_" in logs["net-bind-service"] and "sshd exit 126" not in logs["net-bind-service"], logs
