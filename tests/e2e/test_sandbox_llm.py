"""The LLM path on the real node, as a team member (the sandbox session, tests/e2e/sandbox_session.py): a
``torchtune-llama3.2-1b`` TrainJob whose dataset and model initializers (stand-ins built from the pinned Trainer
module's ``pkg/initializers``, runtime_images.py) download a tiny dataset and a tiny model from the sandbox's
stand-in Hub (sandbox/hub.py, at ``tenancy.hub.endpoint``) with the team's token, into the job's directory of the
team claim; then the trainer step runs on what they downloaded.

The token stays where it belongs: the Hub saw the team's token from the initializer pods only (its access log:
client address, token), the trainer pod's spec, env and log carry neither the token nor the Secret, and a member's
TrainJob pointing the initializers at another Hub, or reading the token itself (the upstream habit), is refused
with a message naming the platform's way.

The trainer step cannot run torchtune here: torchtune needs torch 2.x, bookworm's python3-torch is 1.13, and PyPI's
Linux torch wheels carry CUDA (torch 2.15's x86_64 wheel is 514 MB and pulls nvidia-cudnn/nccl/nvshmem and triton).
So the member's trainer step runs the torch stand-in (``pytorch/pytorch`` reference) with its own command over the
downloaded files: it reads the safetensors weights into torch tensors and the dataset's rows. The opt-in
``test_torchtune_fine_tune_on_a_gpu_cluster`` runs the real ``tune run`` on a cluster with GPUs and a real Hub.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.platform import unique
from tests.e2e.sandbox_session import SANDBOX_MARKS, RunningSandbox
from trainer_infra.core.upstream import jobset
from trainer_infra.core.upstream.kueue import QUEUE_LABEL
from trainer_infra.sandbox.hub import DATASET_REPO, MODEL_REPO, read_log, tiny_dataset, tiny_model
from trainer_infra.sandbox.kube import ApiError, KubeClient, wait_for
from trainer_infra.sandbox.platform_sandbox import GPU
from trainer_infra.sandbox.served_images import trainer_container


def _sandbox(test: Callable[..., None]) -> Callable[..., None]:
    """The sandbox session's marks (opt-in, root); the GPU-cluster test has its own."""
    for mark in SANDBOX_MARKS:
        test = mark(test)
    return test


Obj = dict[str, Any]
TJ = "trainer.kubeflow.org/v1alpha1"
RUNTIME = "torchtune-llama3.2-1b"

#: the trainer step: what a fine-tune would read, read (weights into torch tensors, the dataset's rows), and what
#: of the Hugging Face token the step can see (env names only; the value is compared by the test, never printed)
TRAINER_SCRIPT = """
import json, os, struct, torch
root = "/workspace"
with open(f"{root}/model/model.safetensors", "rb") as f:
    size = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(size))
    raw = f.read()
total = 0
for name, meta in header.items():
    start, end = meta["data_offsets"]
    t = torch.frombuffer(bytearray(raw[start:end]), dtype=torch.float32).reshape(meta["shape"])
    total += t.numel()
rows = [json.loads(line) for line in open(f"{root}/dataset/data/train.jsonl")]
config = json.load(open(f"{root}/model/config.json"))
hf_env = sorted(k for k in os.environ if k.startswith("HF_") or "HUGGING" in k or k == "ACCESS_TOKEN")
print(f"trainer torch {torch.__version__} tensors {len(header)} params {total} model {config['model_type']} "
      f"rows {len(rows)} bin {os.path.exists(root + '/model/pytorch_model.bin')} hf_env {','.join(hf_env) or '-'}",
      flush=True)
try:
    import torchtune  # noqa: F401
    print("torchtune importable", flush=True)
except ImportError as exc:
    print(f"torchtune not installed: {exc}", flush=True)
"""
TRAINER_LINE = re.compile(
    r"trainer torch (\S+) tensors (\d+) params (\d+) model (\w+) rows (\d+) bin (\w+) hf_env (\S+)"
)


def _torch_image(admin: KubeClient) -> str:
    """The torch stand-in's mirrored reference, as the torch-distributed runtime names it (a team image)."""
    return str(trainer_container(admin.get(TJ, "ClusterTrainingRuntime", "torch-distributed"))["image"])


def _trainjob(name: str, member: Any, initializer: Obj, trainer: Obj | None = None) -> Obj:
    return {
        "apiVersion": TJ,
        "kind": "TrainJob",
        "metadata": {
            "name": name,
            "namespace": member.namespace,
            "labels": {QUEUE_LABEL: member.queue},
        },
        "spec": {
            "runtimeRef": {"name": RUNTIME},
            "initializer": initializer,
            **({"trainer": trainer} if trainer else {}),
        },
    }


def _initializer(env: list[Obj] | None = None) -> Obj:
    model: Obj = {"storageUri": f"hf://{MODEL_REPO}"}
    if env:
        model["env"] = env
    return {"dataset": {"storageUri": f"hf://{DATASET_REPO}"}, "model": model}


def _pods(admin: KubeClient, ns: str, name: str) -> dict[str, Obj]:
    pods = admin.list("v1", "Pod", ns, label_selector=f"{jobset.JOBSET_NAME_LABEL}={name}")
    return {p["metadata"]["labels"].get(jobset.REPLICATED_JOB_NAME_LABEL, "?"): p for p in pods}


def _finished(admin: KubeClient, ns: str, name: str, seen: dict[str, Obj], logs: dict[str, str]) -> Obj | None:
    for step, pod in _pods(admin, ns, name).items():
        if pod.get("status", {}).get("phase") in ("Running", "Succeeded", "Failed"):
            seen[step] = pod
            try:
                log = admin.log(pod["metadata"]["name"], ns)
            except ApiError:
                continue
            if not log.startswith("unable to retrieve container logs"):
                logs[step] = log
    job = admin.get(TJ, "TrainJob", name, ns)
    done = [c for c in job.get("status", {}).get("conditions", []) if c["type"] in ("Complete", "Failed")]
    return job if any(c["status"] == "True" for c in done) else None


@_sandbox
def test_initializers_download_with_the_team_token_and_the_trainer_step_reads_it(
    platform_sandbox: RunningSandbox,
) -> None:
    sandbox = platform_sandbox
    hub = sandbox.doc["hub"]
    token, access_log = hub["token"], Path(hub["accessLog"])
    member = sandbox.member(0)
    admin, client = sandbox.admin, member.client()
    before = len(read_log(access_log))
    name = unique("llm")
    trainer = {
        "image": _torch_image(admin),
        "command": ["python3", "-c", TRAINER_SCRIPT],
        "resourcesPerNode": {
            "requests": {GPU: "1", "cpu": "250m", "memory": "1Gi"},
            "limits": {GPU: "1", "memory": "2Gi"},
        },
    }
    client.create(_trainjob(name, member, _initializer(), trainer))
    seen: dict[str, Obj] = {}
    logs: dict[str, str] = {}
    job = wait_for(f"TrainJob {name} to finish", lambda: _finished(admin, member.namespace, name, seen, logs), 900)
    print(
        f"\n[llm] steps seen: {sorted(seen)}\n[llm] logs:\n"
        + "\n".join(f"--- {k}\n{v[-3000:]}" for k, v in logs.items())
    )
    assert any(c["type"] == "Complete" and c["status"] == "True" for c in job["status"]["conditions"]), job["status"]

    # the initializers ran the stand-ins of the catalog's images, downloaded from the Hub the platform named
    for step in ("dataset-initializer", "model-initializer"):
        sandbox.assert_ran_from_mirror(seen[step])
        env = {e["name"]: e for e in seen[step]["spec"]["containers"][0].get("env", [])}
        assert env["HF_ENDPOINT"]["value"] == hub["endpoint"], env
        assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "hf-token", env
    assert "Model has been downloaded" in logs["model-initializer"], logs
    assert "Dataset has been downloaded" in logs["dataset-initializer"], logs

    # the Hub saw the team's token, from the initializer pods only, for the two repos
    entries = read_log(access_log)[before:]
    initializer_ips = {seen[s]["status"]["podIP"] for s in ("dataset-initializer", "model-initializer")}
    assert entries and {e["client"] for e in entries} <= initializer_ips, (entries, initializer_ips)
    assert {e["token"] for e in entries} == {"team"} and {e["status"] for e in entries} == {200}, entries
    paths = {e["path"] for e in entries}
    assert f"/api/models/{MODEL_REPO}/revision/main" in paths and f"/api/datasets/{DATASET_REPO}/revision/main" in paths
    assert seen["node"]["status"]["podIP"] not in {e["client"] for e in entries}

    # the files are on the team volume, in the job's own directory, byte for byte (the model initializer's
    # allow/ignore patterns kept pytorch_model.bin away)
    job_dir = sandbox.host_directory(member.namespace) / "jobs" / name
    for rel, data in tiny_model().items():
        path = job_dir / "model" / rel
        assert (path.read_bytes() == data) if rel != "pytorch_model.bin" else not path.exists(), rel
    for rel, data in tiny_dataset().items():
        assert (job_dir / "dataset" / rel).read_bytes() == data, rel

    # the trainer step read them, and holds nothing of the token: not in its spec, env or log
    (line,) = TRAINER_LINE.findall(logs["node"])
    version, tensors, params, model_type, rows, has_bin, hf_env = line
    assert int(tensors) > 10 and int(params) > 100_000 and model_type == "llama", line
    assert int(rows) == 64 and has_bin == "False" and hf_env == "-", line
    node_spec = json.dumps(seen["node"]["spec"])
    assert "hf-token" not in node_spec and token not in node_spec
    assert token not in "".join(logs.values())
    print(f"[llm] trainer step: torch {version}, {tensors} tensors, {params} parameters, {rows} rows", flush=True)


@_sandbox
@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"name": "HF_ENDPOINT", "value": "http://203.0.113.9"}, "tenancy.hub.endpoint"),
        (
            {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "HF_TOKEN"}}},
            "the team's Secret hf-token (set by the platform team: teams[].secrets.hfToken)",
        ),
    ],
)
def test_a_member_cannot_point_the_initializers_elsewhere_or_read_the_token(
    platform_sandbox: RunningSandbox, env: Obj, words: str
) -> None:
    member = platform_sandbox.member(0)
    with pytest.raises(ApiError) as refused:
        member.client().create(_trainjob(unique("llm-steer"), member, _initializer([env])))
    assert "spec.initializer.dataset.env / spec.initializer.model.env set" in str(refused.value), refused.value
    assert words in str(refused.value), refused.value
    trainer = {"env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "HF_TOKEN"}}}]}
    with pytest.raises(ApiError) as refused:
        member.client().create(_trainjob(unique("llm-read"), member, _initializer(), trainer))
    assert "reads Secret hf-token, the team's Hugging Face token" in str(refused.value), refused.value


@_sandbox
@pytest.mark.parametrize(
    ("model", "words"),
    [
        (
            {"env": [{"name": "PYTHONPATH", "value": "/workspace/planted"}]},  # a module on the team volume
            "may only set the initializers' data settings (",
        ),
        (
            {"env": [{"name": "HTTPS_PROXY", "value": "http://203.0.113.9:3128"}]},  # a member's MITM proxy
            "may only set the initializers' data settings (",
        ),
        ({"secretRef": {"name": "my-secret"}}, "set secretRef, or env reading Secret hf-token"),  # its keys: any
    ],
)
def test_a_member_cannot_run_code_or_proxy_beside_the_team_token_in_the_initializers(
    platform_sandbox: RunningSandbox, model: Obj, words: str
) -> None:
    """The initializers hold the team's token and mount the team volume: the API server's admission policy
    refuses every variable but their data settings, and a Secret's keys, with a message naming why."""
    member = platform_sandbox.member(0)
    initializer = _initializer()
    initializer["model"].update(model)
    with pytest.raises(ApiError) as refused:
        member.client().create(_trainjob(unique("llm-plant"), member, initializer))
    assert words in str(refused.value), refused.value
    assert "the team's Hugging Face token" in str(refused.value), refused.value


GPU_CLUSTER = os.environ.get("E2E_GPU_KUBECONFIG")


@pytest.mark.e2e
@pytest.mark.skipif(not GPU_CLUSTER, reason="opt-in: E2E_GPU_KUBECONFIG=<a member's kubeconfig on a GPU cluster>")
def test_torchtune_fine_tune_on_a_gpu_cluster() -> None:
    """On a cluster with the platform, GPUs and the Hub (or a mirror at tenancy.hub.endpoint) holding
    Llama-3.2-1B-Instruct and tatsu-lab/alpaca, with the team's hf-token set: the upstream SDK example's
    TrainJob (BuiltinTrainer, `tune run`) runs to a checkpoint in /workspace/output. E2E_GPU_NAMESPACE and
    E2E_GPU_QUEUE name the member's namespace and LocalQueue."""
    ns, queue = os.environ.get("E2E_GPU_NAMESPACE", "nlp"), os.environ.get("E2E_GPU_QUEUE", "default")
    name = unique("tune")
    job = {
        "apiVersion": TJ,
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": ns, "labels": {QUEUE_LABEL: queue}},
        "spec": {
            "runtimeRef": {"name": RUNTIME},
            "initializer": {
                "dataset": {"storageUri": "hf://tatsu-lab/alpaca/data"},
                "model": {"storageUri": "hf://meta-llama/Llama-3.2-1B-Instruct"},
            },
            "trainer": {"command": ["tune", "run"], "args": ["dataset.split=train[:100]", "epochs=1"]},
        },
    }
    kubectl = ["kubectl", "--kubeconfig", str(GPU_CLUSTER)]
    subprocess.run([*kubectl, "create", "-f", "-"], input=json.dumps(job), text=True, check=True)
    wait = [*kubectl, "-n", ns, "wait", f"trainjob/{name}", "--for=condition=Complete", "--timeout=3600s"]
    subprocess.run(wait, check=True)
    logs = subprocess.run(
        [*kubectl, "-n", ns, "logs", f"-l{jobset.JOBSET_NAME_LABEL}={name}", "--all-containers", "--tail=-1"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "Model has been downloaded" in logs and re.search(r"(?i)saved checkpoint|model checkpoint", logs), logs
