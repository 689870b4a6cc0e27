"""Progress and ETA of a member's job (Trainer's TrainJobStatus gate, on by default: components.trainer.progress) on
the platform the real ``pulumi up`` installed on the real node (the sandbox session, tests/e2e/sandbox_session.py).

The first team's member submits, with the kubeflow SDK's ``TrainerClient().train()``, a function that trains five
steps and after each posts its progress and ETA to the status server exactly as the SDK 0.5.0's
``update_trainjob_status()`` does (kubeflow/trainer/backends/kubernetes/utils.py: the URL, CA and token file of the
env Trainer injects; ``{"trainerStatus": {"lastUpdatedTime", "progressPercentage", "estimatedRemainingSeconds",
"metrics"}}`` with ``Authorization: Bearer <token>``). The SDK itself is not importable in the CPU stand-in image
(Debian's python3-torch, without ``requests`` or the SDK's models), so the function posts with ``urllib``.

Asserted from what happened: the member sees ``status.trainerStatus`` rise to 100 with an ETA, through the API with
their own client and through ``kubectl`` with their kubeconfig; the server refused (403, not 404: the token, not the
name) a pod of another team's job posting for this job, and this job's pod posting for another job of its team,
while the other team's pod's post for its own job succeeded (its route to the server is open, its token good); a
member's TrainJob naming the injected env or the status token's audience is refused at admission.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from typing import Any

from tests.e2e.member_requests import patched, refused
from tests.e2e.sandbox_session import SANDBOX_MARKS, RunningSandbox
from tests.e2e.test_sandbox_network import script_trainjob
from tests.e2e.test_sandbox_training import _train
from tests.e2e.test_sandbox_up import TJ, finished
from trainer_infra.core.upstream import trainer
from trainer_infra.sandbox.kube import wait_for

pytestmark = SANDBOX_MARKS

Obj = dict[str, Any]
STEPS = 5
SECONDS_PER_STEP = 2


def report_progress() -> None:
    """Five steps of two seconds; after each, rank 0 posts what update_trainjob_status() posts; then the same post
    for another job of the team (`<this job>-sibling`), with this job's token."""
    import json
    import os
    import ssl
    import time
    import urllib.error
    import urllib.request
    from datetime import datetime, timezone

    if os.environ.get("RANK", "0") != "0":
        return
    url = os.environ["KUBEFLOW_TRAINER_SERVER_URL"]
    with open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]) as f:
        token = f.read().strip()
    context = ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"])

    def post(target: str, progress: int, eta: int, loss: float) -> str:
        status = {
            "lastUpdatedTime": datetime.now(timezone.utc).isoformat(),  # noqa: UP017 (as the SDK writes it)
            "progressPercentage": progress,
            "estimatedRemainingSeconds": eta,
            "metrics": [{"name": "loss", "value": str(loss)}],
        }
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        body = json.dumps({"trainerStatus": status}).encode()
        request = urllib.request.Request(target, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, context=context, timeout=5) as response:
                return f"HTTP {response.status}"
        except urllib.error.HTTPError as err:
            return f"HTTP {err.code} {err.read().decode().strip()}"

    steps, seconds = 5, 2
    loss = 1.0
    for step in range(1, steps + 1):
        time.sleep(seconds)
        loss /= 2
        progress, eta = step * 100 // steps, (steps - step) * seconds
        print(f"step {step}: loss {loss} progress {progress}% eta {eta}s: {post(url, progress, eta, loss)}", flush=True)
    own = url.removesuffix("/status")
    sibling = own.rpartition("/")[2] + "-sibling"
    print(f"post for {sibling}: {post(own + '-sibling/status', 7, 1, 9.0)}", flush=True)


#: the other team's job: posts for its own job, then for the victim's (``$VICTIM_URL``), with its own token
FOREIGN = """
import json, os, ssl, urllib.error, urllib.request
from datetime import datetime, timezone
context = ssl.create_default_context(cafile=os.environ['KUBEFLOW_TRAINER_SERVER_CA_CERT'])
token = open(os.environ['KUBEFLOW_TRAINER_SERVER_TOKEN']).read().strip()
def post(label, target, progress):
    status = {'lastUpdatedTime': datetime.now(timezone.utc).isoformat(), 'progressPercentage': progress}
    headers = {'Authorization': f'Bearer {token}', 'Content-Type': 'application/json'}
    request = urllib.request.Request(target, json.dumps({'trainerStatus': status}).encode(), headers, method='POST')
    try:
        with urllib.request.urlopen(request, context=context, timeout=5) as response:
            print(f'{label}: HTTP {response.status}', flush=True)
    except urllib.error.HTTPError as err:
        print(f'{label}: HTTP {err.code} {err.read().decode().strip()}', flush=True)
post('own', os.environ['KUBEFLOW_TRAINER_SERVER_URL'], 3)
post('victim', os.environ['VICTIM_URL'], 99)
"""


def _job_log(sb: RunningSandbox, ns: str, name: str) -> str:
    pods = sb.admin.list("v1", "Pod", ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")
    return "\n".join(sb.admin.log(p["metadata"]["name"], ns) for p in pods)


def test_a_member_sees_progress_and_eta_and_no_other_job_can_post_for_theirs(platform_sandbox: RunningSandbox) -> None:
    sb = platform_sandbox
    admin = sb.admin
    member, other = sb.member(0), sb.member(1)
    assert other.namespace != member.namespace
    client = member.client()
    ns = member.namespace
    start = time.monotonic()
    name = _train(member, report_progress, 1, "1Gi")
    sibling = f"{name}-sibling"
    foreign = f"progress-foreign-{int(time.time()) % 100000}"

    def victim_pod_url() -> str | None:
        """The URL Trainer gave the job's pods (trainjobstatus.go createEnvVars)."""
        pods = admin.list("v1", "Pod", ns, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}")
        for pod in pods:
            for c in pod["spec"]["containers"]:
                for e in c.get("env", []):
                    if e["name"] == trainer.STATUS_URL_ENV:
                        return str(e["value"])
        return None

    url = wait_for(f"the pods of {ns}/{name} to carry the status URL", victim_pod_url, 180)
    other.client().create(script_trainjob(other, foreign, 1, FOREIGN, {"VICTIM_URL": url}))

    # the member polls their job's status as they would, with their own identity, while it trains
    seen: list[tuple[int, int | None]] = []

    def done_watching() -> Obj | None:
        job = client.get(TJ, "TrainJob", name, ns)
        status = job.get("status", {}).get("trainerStatus") or {}
        if "progressPercentage" in status:
            point = (int(status["progressPercentage"]), status.get("estimatedRemainingSeconds"))
            if not seen or seen[-1] != point:
                seen.append(point)
        return finished(admin, ns, name)

    job = wait_for(f"TrainJob {ns}/{name} to finish", done_watching, 300)
    sb.times["progress: submit → Complete with progress 100"] = round(time.monotonic() - start, 1)
    assert {c["type"]: c["status"] for c in job["status"]["conditions"]}.get("Complete") == "True", job["status"]
    log = _job_log(sb, ns, name)
    print(f"\n[progress] {ns}/{name} log:\n{log}\n[progress] seen by {member.user}: {seen}", flush=True)

    # every post of the job was taken; the member saw progress rise to 100, with an ETA on the way
    assert len(re.findall(r": HTTP 200$", log, re.M)) == STEPS, log
    assert seen and seen == sorted(seen, key=lambda p: p[0]) and seen[-1] == (100, 0), seen
    assert any(eta for _, eta in seen), seen
    final = client.get(TJ, "TrainJob", name, ns)["status"]["trainerStatus"]
    assert final["progressPercentage"] == 100 and final["estimatedRemainingSeconds"] == 0, final
    assert final["metrics"] == [{"name": "loss", "value": str(0.5**STEPS)}], final
    kubectl = shutil.which("kubectl")
    if kubectl:
        jsonpath = "{.status.trainerStatus.progressPercentage} {.status.trainerStatus.estimatedRemainingSeconds}"
        shown = subprocess.run(
            [
                kubectl,
                "--kubeconfig",
                member.kubeconfig,
                "-n",
                ns,
                "get",
                "trainjob",
                name,
                "-o",
                f"jsonpath={jsonpath}",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        print(f"[progress] kubectl as {member.user}: {shown}", flush=True)
        assert shown.split() == ["100", "0"], shown

    # this job's token posts for this job only: another job of the team is refused by the server (403: the token)
    assert re.search(rf"post for {re.escape(sibling)}: HTTP 403 .*Forbidden", log), log

    # the other team's pod reached the server (its own post taken), and its post for this job was refused
    wait_for(f"TrainJob {other.namespace}/{foreign} to finish", lambda: finished(admin, other.namespace, foreign), 300)
    foreign_log = _job_log(sb, other.namespace, foreign)
    print(f"[progress] {other.namespace}/{foreign} log:\n{foreign_log}", flush=True)
    assert "own: HTTP 200" in foreign_log, foreign_log
    assert re.search(r"victim: HTTP 403 .*Forbidden", foreign_log), foreign_log
    assert 99 not in [p for p, _ in seen] and 7 not in [p for p, _ in seen], seen
    sb.times["progress: submit → both jobs done"] = round(time.monotonic() - start, 1)


def test_a_member_cannot_forge_the_status_env_or_token(platform_sandbox: RunningSandbox) -> None:
    """What Trainer injects is Trainer's: a member's TrainJob that points the URL elsewhere or asks for a token of
    another job's audience is refused by the API server with the reason."""
    sb = platform_sandbox
    member = sb.member(0)
    client = member.client()
    script = "print('never runs')"
    job = script_trainjob(
        member, "progress-forged-env", 1, script, {trainer.STATUS_URL_ENV: "https://attacker.example"}
    )
    message = refused(client, job, "spec.trainer.env", "send the job's token elsewhere")
    print(f"\n[progress] forged env: {message}", flush=True)
    volume = {
        "name": "token",
        "projected": {
            "sources": [
                {"serviceAccountToken": {"audience": trainer.status_audience(member.namespace, "victim"), "path": "t"}}
            ]
        },
    }
    pod = {
        "volumes": [volume],
        "containers": [{"name": "node", "volumeMounts": [{"name": "token", "mountPath": "/t"}]}],
    }
    forged = patched(script_trainjob(member, "progress-forged-token", 1, script, {}), pod)
    message = refused(client, forged, "names what Trainer injects", "post progress as another job")
    print(f"[progress] forged token: {message}", flush=True)
