"""Getting the model out (storage.files, on by default): on the platform the real ``pulumi up`` installed on the
real node (the sandbox session, tests/e2e/sandbox_session.py), a member's job trains and writes its checkpoint to
``$CHECKPOINT_DIR``, and the member downloads it through the API server's service proxy to their team's file
service, with nothing but their kubeconfig: no exec, no pod of their own.

Asserted from what happened: the bytes the member downloads (through the API and with ``kubectl get --raw``) have the
sha256 and size the job printed after writing them; the job directory's listing names the checkpoint; a member of
the other team is refused (403) on this team's proxy; PUT, POST, PATCH and DELETE through the proxy are refused to
the member (403, RBAC) and, sent by the admin past RBAC, by the server (405), with the checkpoint unchanged; a
``..`` path and every symlink the job planted on the volume (to ``/proc/self/environ``, ``/etc``, the job directory's
parent, the claim root) are refused, with nothing of their targets in the answer; the other team's job cannot open
the server's port, at its pod address or its Service's.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import re
import shutil
import ssl
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.platform import unique
from tests.e2e.sandbox_session import SANDBOX_MARKS, Member, RunningSandbox
from tests.e2e.test_sandbox_network import script_trainjob
from tests.e2e.test_sandbox_up import finished
from trainer_infra.sandbox.kube import wait_for
from trainer_infra.storage import files

pytestmark = SANDBOX_MARKS

Obj = dict[str, Any]

#: trains a linear model for 50 steps, saves it to $CHECKPOINT_DIR/model.pt, prints its sha256 and size, then plants
#: symlinks a hostile member could: to the pod's environment, /etc, the job directory's parent, the claim's root
TRAIN = """
import hashlib, os, torch
d = os.environ['CHECKPOINT_DIR']
os.makedirs(d, exist_ok=True)
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(64, 4)
y = x.sum(1, keepdim=True)
for step in range(50):
    opt.zero_grad(); loss = ((model(x) - y) ** 2).mean(); loss.backward(); opt.step()
path = os.path.join(d, 'model.pt')
torch.save(model.state_dict(), path)
data = open(path, 'rb').read()
print(f'step 50 loss {loss.item():.5f}', flush=True)
print(f'checkpoint {path} sha256 {hashlib.sha256(data).hexdigest()} size {len(data)}', flush=True)
for name, target in [('environ', '/proc/self/environ'), ('etc', '/etc'), ('up', '../..'), ('root', '/files')]:
    os.symlink(target, os.path.join(d, name))
print('planted', sorted(os.listdir(d)), flush=True)
"""

#: the other team's job: connects to the file server's pod and Service (``$TARGETS``: label=host:port, ...)
PROBE = """
import os, socket, time
time.sleep(10)
for item in os.environ['TARGETS'].split(','):
    label, _, where = item.partition('=')
    host, _, port = where.rpartition(':')
    outcome = 'refused'
    for attempt in range(3):
        try:
            socket.create_connection((host, int(port)), timeout=3).close()
            outcome = 'connected'
            break
        except OSError as err:
            outcome = f'refused ({err})'
    print(f'{label}: {outcome}', flush=True)
"""


def _https(kubeconfig: str) -> tuple[str, int, ssl.SSLContext]:
    """The API server's host, port and a TLS context with the kubeconfig's client certificate."""
    doc = yaml.safe_load(Path(kubeconfig).read_text())
    cluster, user = doc["clusters"][0]["cluster"], doc["users"][0]["user"]
    context = ssl.create_default_context(cafile=cluster["certificate-authority"])
    context.load_cert_chain(user["client-certificate"], user["client-key"])
    host, _, port = cluster["server"].removeprefix("https://").rpartition(":")
    return host, int(port), context


def call(kubeconfig: str, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
    """One request exactly as written (no path cleaning on this side): status and raw body."""
    host, port, context = _https(kubeconfig)
    connection = http.client.HTTPSConnection(host, port, context=context, timeout=60)
    try:
        connection.request(method, path, body=body)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def proxy(namespace: str, rest: str) -> str:
    return f"/api/v1/namespaces/{namespace}/services/{files.NAME}/proxy/{rest}"


def _job_log(sb: RunningSandbox, ns: str, name: str) -> str:
    pods = sb.admin.list("v1", "Pod", ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")
    return "\n".join(sb.admin.log(p["metadata"]["name"], ns) for p in pods)


def _server_ready(sb: RunningSandbox, ns: str) -> Obj | None:
    pods = sb.admin.list("v1", "Pod", ns, label_selector=f"{next(iter(files.POD_LABELS))}={files.NAME}")
    for pod in pods:
        ready = {c["type"]: c["status"] for c in pod.get("status", {}).get("conditions", [])}.get("Ready")
        if ready == "True":
            return pod
    return None


def _kubectl_raw(member: Member, path: str) -> bytes:
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is on PATH in CI"
    return subprocess.run(
        [kubectl, "--kubeconfig", member.kubeconfig, "get", "--raw", path], capture_output=True, check=True
    ).stdout


def test_a_member_downloads_their_jobs_checkpoint_and_nothing_else(platform_sandbox: RunningSandbox) -> None:
    sb = platform_sandbox
    admin = sb.admin
    member, other = sb.member(0), sb.member(1)
    ns = member.namespace
    assert other.namespace != ns
    start = time.monotonic()
    server = wait_for(f"the file service of {ns} to be Ready", lambda: _server_ready(sb, ns), 300)
    # its image came from the mirror (the python image, served here by the torch stand-in; the kubelet reported no
    # imageID for it on the first run, so the digest is not compared)
    assert server["spec"]["containers"][0]["image"] in sb.doc["runtimeImages"], sb.doc["runtimeImages"]
    assert server["spec"]["automountServiceAccountToken"] is False
    assert server["spec"]["nodeName"] == sb.node, server["spec"].get("nodeName")  # storage.files.nodeSelector
    name = unique("model-out")
    member.client().create(script_trainjob(member, name, 1, TRAIN, {}))
    job = wait_for(f"TrainJob {ns}/{name} to finish", lambda: finished(admin, ns, name), 300)
    log = _job_log(sb, ns, name)
    print(f"\n[model-out] {ns}/{name} log:\n{log}", flush=True)
    assert {c["type"]: c["status"] for c in job["status"]["conditions"]}.get("Complete") == "True", job["status"]
    written = re.search(r"checkpoint (\S+) sha256 ([0-9a-f]{64}) size (\d+)", log)
    assert written, log
    sha, size = written.group(2), int(written.group(3))
    sb.times["model out: submit → Complete"] = round(time.monotonic() - start, 1)

    # the member lists the job's checkpoints and downloads the checkpoint: the bytes the job wrote
    directory = f"jobs/{name}/checkpoints/"
    status, body = call(member.kubeconfig, "GET", proxy(ns, directory))
    assert status == 200, body
    listing = json.loads(body)
    print(f"[model-out] listing as {member.user}:\n{json.dumps(listing, indent=1)}", flush=True)
    entries = {e["name"]: e for e in listing["entries"]}
    assert entries["model.pt"] == {"name": "model.pt", "type": "file", "size": size}, entries
    assert {entries[n]["type"] for n in ("environ", "etc", "up", "root")} == {"symlink"}, entries
    began = time.monotonic()
    status, body = call(member.kubeconfig, "GET", proxy(ns, directory + "model.pt"))
    sb.times["model out: download"] = round(time.monotonic() - began, 2)
    assert status == 200 and len(body) == size and hashlib.sha256(body).hexdigest() == sha, (status, len(body))
    by_kubectl = _kubectl_raw(member, proxy(ns, directory + "model.pt"))
    assert hashlib.sha256(by_kubectl).hexdigest() == sha
    print(f"[model-out] downloaded {len(body)} bytes, sha256 {sha} (the job's); kubectl: the same", flush=True)

    # the other team's member is refused by RBAC on this team's proxy
    status, body = call(other.kubeconfig, "GET", proxy(ns, directory + "model.pt"))
    print(f"[model-out] {other.user} ({other.namespace}) GET: {status} {body[:300]!r}", flush=True)
    assert status == 403 and b"services/proxy" in body, body

    # nothing is written: refused to the member by RBAC, and by the server to the admin past RBAC
    for method in ("PUT", "POST", "PATCH", "DELETE"):
        status, body = call(member.kubeconfig, method, proxy(ns, directory + "model.pt"), b"overwritten")
        print(f"[model-out] {member.user} {method}: {status} {body[:200]!r}", flush=True)
        assert status == 403, (method, body)
        status, body = call(sb.doc["adminKubeconfig"], method, proxy(ns, directory + "model.pt"), b"overwritten")
        print(f"[model-out] admin {method} (past RBAC): {status} {body[:200]!r}", flush=True)
        assert status == 405, (method, body)
    status, body = call(member.kubeconfig, "GET", proxy(ns, directory + "model.pt"))
    assert status == 200 and hashlib.sha256(body).hexdigest() == sha

    # `..` and the planted symlinks are refused, nothing of their targets comes back
    attempts = [
        directory + "../../../../etc/passwd",
        directory + "%2e%2e/%2e%2e/%2e%2e/%2e%2e/etc/passwd",
        directory + "..%2f..%2f..%2f..%2fetc%2fpasswd",
        directory + "environ",
        directory + "etc/passwd",
        directory + "up/" + directory + "model.pt",
        directory + "root/" + directory + "model.pt",
    ]
    for path in attempts:
        status, body = call(member.kubeconfig, "GET", proxy(ns, path))
        print(f"[model-out] GET {path}: {status} {body[:200]!r}", flush=True)
        # refused by the server, or by the API server before it (a redirect to the cleaned path is no content)
        assert status in (301, 308, 400, 403, 404), (path, status, body)
        assert b"root:" not in body and b"KUBERNETES_SERVICE" not in body and b"PATH=" not in body, (path, body)
    for link in ("environ", "etc/passwd", "up/", "root/"):
        status, body = call(member.kubeconfig, "GET", proxy(ns, directory + link))
        assert status == 403 and b"symlink" in body, (link, status, body)

    # no pod reaches the server's port: the other team's job, at the pod's address and at the Service's
    service = admin.get("v1", "Service", files.NAME, ns)
    targets = f"pod={server['status']['podIP']}:{files.PORT},service={service['spec']['clusterIP']}:{files.PORT}"
    probe = unique("model-out-probe")
    other.client().create(script_trainjob(other, probe, 1, PROBE, {"TARGETS": targets}))
    wait_for(f"TrainJob {other.namespace}/{probe} to finish", lambda: finished(admin, other.namespace, probe), 300)
    probe_log = _job_log(sb, other.namespace, probe)
    print(f"[model-out] {other.namespace}/{probe}:\n{probe_log}", flush=True)
    assert re.search(r"^pod: refused", probe_log, re.M) and re.search(r"^service: refused", probe_log, re.M), probe_log
    sb.times["model out: whole scenario"] = round(time.monotonic() - start, 1)
