"""A notebook that submits (docs/data-scientists.md#a-notebook-that-submits), on the platform the real ``pulumi up``
installed on the real node (the sandbox session, tests/e2e/sandbox_session.py).

The sandbox stack gives the first team (``restricted``) a notebook (``teams[].notebook``: the notebook stand-in,
python3 and the kubeflow SDK 0.5.0 the project pins, sandbox/runtime_images.py ``NOTEBOOK``). The admin execs into
its pod (the API server's ``exec``, what ``kubectl exec`` calls) and runs what a data scientist runs in a cell:
``TrainerClient().train()`` with the pod's own token, nothing configured. Asserted from what ran: the TrainJob the
notebook submitted completed on the real node, its log says it trained and wrote a checkpoint whose SHA-256 it
prints, and the notebook reads those very bytes from the team claim it mounts; the notebook's token has the member's
rights (no more: no Secret, no pod, nothing in another team); from the notebook, the API server's Service connects
and the kubelet's port of the same address, the controllers' webhook and metrics ports and Trainer's status server
are refused (each of them connected from the node: a refusal is the policy's, never a dead port); a member's
TrainJob that asks for the notebook's label or ServiceAccount is refused with the reason.
"""

from __future__ import annotations

import hashlib
import re
import time
from typing import Any

from tests.e2e.member_requests import refused
from tests.e2e.platform import unique
from tests.e2e.sandbox_session import SANDBOX_MARKS, RunningSandbox
from tests.e2e.test_sandbox_network import PROBE, script_trainjob
from tests.e2e.test_sandbox_up import TJ, assert_quota_released, finished
from trainer_infra.sandbox.chart_sandbox import CONTROLLER_NAMESPACES
from trainer_infra.sandbox.kube import wait_for
from trainer_infra.sandbox.platform_sandbox import TRAINER_ID
from trainer_infra.tenancy.notebook import NOTEBOOK, NOTEBOOK_LABEL

pytestmark = SANDBOX_MARKS

Obj = dict[str, Any]
#: what the data scientist's cell runs in the notebook (written to a file: the SDK reads the function's source)
CELL = '''
import hashlib, sys
from kubeflow.trainer import CustomTrainer, TrainerClient
from kubeflow.trainer.options import Labels


def fit_line():
    """Fits y = 3x + 1 with torch on the CPU; rank 0 saves the model to $CHECKPOINT_DIR and prints its SHA-256."""
    import hashlib, os
    import torch

    if os.environ.get("RANK", "0") != "0":  # torchrun may start a rank per CPU: one writer
        return
    x = torch.linspace(-1, 1, 64).unsqueeze(1)
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    for step in range(30):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), 3 * x + 1)
        loss.backward()
        optimizer.step()
    path = os.path.join(os.environ["CHECKPOINT_DIR"], "line.pt")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    torch.save(model.state_dict(), path)
    digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
    print(f"notebook job: loss {loss.item():.6f} after 30 steps, wrote {path} sha256 {digest}", flush=True)


client = TrainerClient()
name = client.train(
    runtime=client.get_runtime("torch-distributed"),
    trainer=CustomTrainer(func=fit_line, num_nodes=1, resources_per_node={"gpu": 1, "cpu": "500m", "memory": "1Gi"}),
    options=[Labels(labels={"kueue.x-k8s.io/queue-name": sys.argv[1]})],
)
print(f"submitted {name}", flush=True)
job = client.wait_for_job_status(name, status={"Complete", "Failed"}, timeout=600, polling_interval=2)
print(f"{name}: {job.status}", flush=True)
for line in client.get_job_logs(name):
    print(line, end="" if line.endswith("\\n") else "\\n", flush=True)
'''
#: the notebook's token asks the API server what it may do (SelfSubjectAccessReview): the members' rights only
RIGHTS = """
import sys
from kubernetes import client, config
config.load_incluster_config()
api = client.AuthorizationV1Api()
for check in sys.argv[1:]:
    verb, resource, group, ns = check.split(":")
    resource, _, sub = resource.partition("/")
    attrs = client.V1ResourceAttributes(
        verb=verb, resource=resource, subresource=sub or None, group=group, namespace=ns
    )
    spec = client.V1SelfSubjectAccessReviewSpec(resource_attributes=attrs)
    review = api.create_self_subject_access_review(client.V1SelfSubjectAccessReview(spec=spec))
    print(f"{check} {review.status.allowed}", flush=True)
"""
SHA = re.compile(r"notebook job: loss (\S+) after 30 steps, wrote (\S+) sha256 ([0-9a-f]{64})")


def _notebook_pod(sb: RunningSandbox, ns: str) -> Obj:
    def ready() -> Obj | None:
        pods = sb.admin.list("v1", "Pod", ns, label_selector=f"{NOTEBOOK_LABEL}=true")
        running = [
            p
            for p in pods
            if any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", []))
        ]
        return running[0] if len(running) == 1 else None

    pod: Obj = wait_for(f"the notebook's pod in {ns} to be Ready", ready, 120)
    return pod


def _exec(sb: RunningSandbox, pod: Obj, *cmd: str, timeout: float = 900) -> tuple[int | None, str, str]:
    """``cmd`` in the notebook's container as the admin, through the API server's ``exec`` (``kubectl exec``)."""
    from kubernetes import client, config
    from kubernetes.stream import stream

    api = client.CoreV1Api(config.new_client_from_config(sb.doc["adminKubeconfig"]))
    meta = pod["metadata"]
    ws = stream(
        api.connect_get_namespaced_pod_exec,
        meta["name"],
        meta["namespace"],
        command=list(cmd),
        container="notebook",
        stdin=False,
        stdout=True,
        stderr=True,
        tty=False,
        _preload_content=False,
    )
    ws.run_forever(timeout=timeout)
    out, err = ws.read_stdout(), ws.read_stderr()
    code = ws.returncode
    ws.close()
    print(
        f"\n$ kubectl exec {meta['name']} -- {' '.join(c if len(c) < 60 else c[:57] + '...' for c in cmd)}\n{out}{err}"
    )
    return code, out, err


def test_the_notebook_submits_a_job_that_trains_and_reads_its_checkpoint(platform_sandbox: RunningSandbox) -> None:
    sb = platform_sandbox
    member = sb.member(0)
    ns = member.namespace
    pod = _notebook_pod(sb, ns)
    spec = pod["spec"]
    # the platform's pod: its ServiceAccount, restricted, uid 1000, read-only root, the image the mirror served
    assert spec["serviceAccountName"] == NOTEBOOK and spec["nodeName"] == sb.node
    assert spec["securityContext"]["runAsUser"] == TRAINER_ID and spec["securityContext"]["runAsNonRoot"]
    assert spec["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
    sb.assert_ran_from_mirror(pod)

    start = time.monotonic()
    code, _, _ = _exec(sb, pod, "python3", "-c", f"open('/tmp/cell.py', 'w').write({CELL!r})")
    assert code == 0
    code, out, err = _exec(sb, pod, "python3", "/tmp/cell.py", member.queue)
    submit_s = round(time.monotonic() - start, 1)
    sb.times["notebook: SDK train() → Complete → logs, from inside"] = submit_s
    assert code == 0, out + err
    found = re.search(r"submitted (\S+)", out)
    assert found, out + err
    name = found.group(1)
    assert f"{name}: Complete" in out, out

    # what really ran: the TrainJob Complete, its pod's log (read by the admin) with the checkpoint's digest
    job = wait_for(f"TrainJob {name} to finish", lambda: finished(sb.admin, ns, name), 60)
    complete = [c for c in job["status"]["conditions"] if c["type"] == "Complete"]
    assert complete and complete[0]["status"] == "True", job["status"]
    (trainer_pod,) = sb.admin.list("v1", "Pod", ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")
    log = sb.admin.log(trainer_pod["metadata"]["name"], ns)
    trained = SHA.search(log)
    assert trained, log
    loss, path, digest = trained.groups()
    assert float(loss) < 0.01 and path == "/workspace/checkpoints/line.pt", trained.group(0)
    assert trained.group(0) in out  # the SDK's get_job_logs in the notebook saw the same line

    # the notebook reads those bytes from the team claim it mounts: the job's directory jobs/<name>/
    inside = f"/workspace/jobs/{name}/checkpoints/line.pt"
    code, out, _ = _exec(
        sb,
        pod,
        "python3",
        "-c",
        f"import hashlib; d = open({inside!r}, 'rb').read(); print(len(d), d[:2], hashlib.sha256(d).hexdigest())",
    )
    assert code == 0
    size, magic, read_digest = out.split()
    assert read_digest == digest and magic == "b'PK'", out  # torch.save's zip, byte for byte
    on_host = (sb.host_directory(ns) / "jobs" / name / "checkpoints" / "line.pt").read_bytes()
    assert hashlib.sha256(on_host).hexdigest() == digest and len(on_host) == int(size)
    assert_quota_released(sb.admin, member, name)


def test_the_notebooks_token_has_the_members_rights_and_no_more(platform_sandbox: RunningSandbox) -> None:
    sb = platform_sandbox
    ns = sb.member(0).namespace
    other = sb.member(1).namespace
    pod = _notebook_pod(sb, ns)
    checks = {
        f"create:trainjobs:trainer.kubeflow.org:{ns}": True,
        f"list:pods::{ns}": True,
        f"get:pods/log::{ns}": True,
        f"create:pods::{ns}": False,
        f"create:pods/exec::{ns}": False,
        f"list:secrets::{ns}": False,
        f"patch:trainjobs:trainer.kubeflow.org:{ns}": False,
        f"create:deployments:apps:{ns}": False,
        f"create:trainjobs:trainer.kubeflow.org:{other}": False,
        f"list:pods::{other}": False,
    }
    code, out, err = _exec(sb, pod, "python3", "-c", RIGHTS, *checks)
    assert code == 0, out + err
    answers = dict(line.rsplit(" ", 1) for line in out.splitlines())
    assert answers == {k: str(v) for k, v in checks.items()}, answers


def _targets(sb: RunningSandbox) -> dict[str, str]:
    """label → host:port: the kubelet's port of the API server's address, every container port of the controllers'
    pods (webhooks, metrics, Trainer's status server)."""
    node = sb.admin.get("v1", "Node", sb.node)["status"]
    address = next(a["address"] for a in node["addresses"] if a["type"] == "InternalIP")
    out = {"kubelet": f"{address}:{node['daemonEndpoints']['kubeletEndpoint']['Port']}"}
    for ns in CONTROLLER_NAMESPACES:
        for pod in sb.admin.list("v1", "Pod", ns):
            for container in pod["spec"]["containers"]:
                for port in container.get("ports", []):
                    if port.get("protocol", "TCP") == "TCP":
                        out[f"{pod['metadata']['name']}/{port['containerPort']}"] = (
                            f"{pod['status']['podIP']}:{port['containerPort']}"
                        )
    return out


def _probe(run: Any, targets: dict[str, str]) -> dict[str, str]:
    code, out, err = run(
        "env", "TRIES=2", "TARGETS=" + ",".join(f"{k}={v}" for k, v in targets.items()), "python3", "-c", PROBE
    )
    assert code == 0, out + err
    return dict(line.split(": ", 1) for line in out.splitlines() if ": " in line)


def test_the_notebook_reaches_the_api_server_and_nothing_else(platform_sandbox: RunningSandbox) -> None:
    sb = platform_sandbox
    pod = _notebook_pod(sb, sb.member(0).namespace)
    targets = _targets(sb)
    assert len(targets) > 3, targets  # the kubelet and at least a webhook and a metrics port

    def from_node(*cmd: str) -> tuple[int, str, str]:
        proc = sb.inside(*cmd)
        return proc.returncode, proc.stdout, proc.stderr

    from_the_node = _probe(from_node, targets)
    live = {label: targets[label] for label, result in from_the_node.items() if result.startswith("connected")}
    print(f"from the node: {from_the_node}", flush=True)
    # webhooks, metrics, the status server and the kubelet (the node's door: exec into any pod)
    assert "kubelet" in live and len(live) > 3, from_the_node
    from_the_notebook = _probe(lambda *cmd: _exec(sb, pod, *cmd), {**live, "api": "kubernetes.default.svc:443"})
    print(f"from the notebook: {from_the_notebook}", flush=True)
    assert from_the_notebook.pop("api").startswith("connected"), from_the_notebook
    assert from_the_notebook.keys() == live.keys()
    opened = {label: result for label, result in from_the_notebook.items() if not result.startswith("refused")}
    assert not opened, opened


def test_a_member_cannot_give_a_job_the_notebooks_label_or_service_account(platform_sandbox: RunningSandbox) -> None:
    sb = platform_sandbox
    member = sb.member(0)
    me = member.client()
    job = script_trainjob(member, unique("nb-label"), 1, "print('x')", {})
    template = {"metadata": {"labels": {NOTEBOOK_LABEL: "true"}}, "spec": {"containers": [{"name": "node"}]}}
    patch = {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": template}}}]}
    job["spec"]["runtimePatches"] = [
        {"manager": "example.com/member", "trainingRuntimeSpec": {"template": {"spec": patch}}}
    ]
    refused(me, job, f"sets the label {NOTEBOOK_LABEL}", "reach the API server")
    job = script_trainjob(member, unique("nb-account"), 1, "print('x')", {})
    template = {"spec": {"serviceAccountName": NOTEBOOK, "containers": [{"name": "node"}]}}
    patch = {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": template}}}]}
    job["spec"]["runtimePatches"] = [
        {"manager": "example.com/member", "trainingRuntimeSpec": {"template": {"spec": patch}}}
    ]
    refused(me, job, "service account that is not allowed")
    assert not [t for t in sb.admin.list(TJ, "TrainJob", member.namespace) if t["metadata"]["name"].startswith("nb-")]
