"""The team's Hugging Face token reaches the platform's initializers only, and goes only to the Hub the platform
names (`tenancy.hub.endpoint`): rendered into the initializers, refused wherever a member's TrainJob or runtime
would set the Hub, read the token elsewhere, or copy the upstream example that reads HF_TOKEN itself."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import MINIMAL, render
from tests.tenancy.test_admission_policies import SETTINGS, refusals, runtime, trainjob
from trainer_infra.core.errors import ConfigError
from trainer_infra.core.upstream.trainer import INITIALIZER_DATA_ENV
from trainer_infra.manifests.runtime import INITIALIZERS
from trainer_infra.stack.validate import validate
from trainer_infra.tenancy.admission.policy import admission_objects, policy_name

Obj = dict[str, Any]
HUB = "http://10.96.0.50:8080"
TOKEN_REF = {"secretKeyRef": {"name": "hf-token", "key": "HF_TOKEN"}}


@pytest.fixture(scope="module")
def policies() -> dict[str, Obj]:
    objs = admission_objects(SETTINGS)
    return {o["metadata"]["name"]: o for o in objs if o["kind"] == "ValidatingAdmissionPolicy"}


def _policy(policies: dict[str, Obj], kind: str) -> Obj:
    return policies[policy_name(kind)]


def _stack(hub: Obj | None) -> Obj:
    tenancy = {"hub": hub} if hub is not None else {}
    return {**MINIMAL, "tenancy": tenancy, "teams": [{"name": "nlp", "secrets": {"hfToken": "hf_x"}}]}


def _runtimes(raw: Obj) -> dict[str, Obj]:
    return {m["metadata"]["name"]: m for m in render(raw).manifests if m["kind"] == "ClusterTrainingRuntime"}


def _env(runtime_manifest: Obj) -> dict[str, dict[str, Obj]]:
    """container name -> env name -> env entry, over every replicated job."""
    out: dict[str, dict[str, Obj]] = {}
    for job in runtime_manifest["spec"]["template"]["spec"]["replicatedJobs"]:
        for c in job["template"]["spec"]["template"]["spec"]["containers"]:
            out[c["name"]] = {e["name"]: e for e in c.get("env", [])}
    return out


# -- the setting ---------------------------------------------------------------------------------------


def test_hub_endpoint_is_set_in_every_initializer_and_nowhere_else() -> None:
    runtimes = _runtimes(_stack({"endpoint": HUB + "/"}))
    tune = _env(runtimes["torchtune-llama3.2-1b"])
    for step in INITIALIZERS:
        assert tune[step]["HF_ENDPOINT"] == {"name": "HF_ENDPOINT", "value": HUB}
        assert tune[step]["HF_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "hf-token"
    assert "HF_ENDPOINT" not in tune["node"] and "HF_TOKEN" not in tune["node"]
    for name, manifest in runtimes.items():
        for container, env in _env(manifest).items():
            assert ("HF_ENDPOINT" in env) == (container in INITIALIZERS), (name, container)


def test_without_a_hub_endpoint_the_initializers_use_huggingface_hubs_default() -> None:
    tune = _env(_runtimes(_stack(None))["torchtune-llama3.2-1b"])
    assert all("HF_ENDPOINT" not in env for env in tune.values())


@pytest.mark.parametrize(
    ("hub", "words"),
    [
        ({"endpoint": "ftp://hub"}, "not an http(s) URL"),
        ({"endpoint": "https://user:pw@hub.example.com"}, "no credentials"),
        ({"endpoint": "https://hub.example.com", "token": "x"}, "token"),
    ],
)
def test_a_bad_hub_setting_is_a_config_error_with_its_path(hub: Obj, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        validate(_stack(hub))
    assert any(i.path.startswith("tenancy.hub") for i in err.value.issues), err.value.render()
    assert words in err.value.render()


# -- a member cannot steer the initializers or read the token --------------------------------------------


def _with_initializer(env: list[Obj], step: str = "model") -> Obj:
    job = trainjob()
    job["spec"]["runtimeRef"] = {"name": "torchtune-llama3.2-1b"}
    job["spec"]["initializer"] = {step: {"storageUri": "hf://org/model", "env": env}}
    return job


@pytest.mark.parametrize("step", ["model", "dataset"])
@pytest.mark.parametrize(
    "env",
    [
        {"name": "HF_ENDPOINT", "value": "https://evil.example.com"},
        {"name": "HF_TOKEN", "valueFrom": TOKEN_REF},  # the upstream habit: the initializer reads HF_TOKEN itself
        {"name": "HUGGING_FACE_HUB_TOKEN", "value": "hf_mine"},
    ],
)
def test_a_trainjob_setting_the_hub_or_the_token_on_an_initializer_is_told_the_platforms_way(
    policies: dict[str, Obj], env: Obj, step: str
) -> None:
    messages = refusals(_policy(policies, "TrainJob"), _with_initializer([env], step), namespace="nlp")
    assert messages, env
    first = messages[0]
    assert first.startswith("TrainJob tj refused: spec.initializer.dataset.env / spec.initializer.model.env set")
    assert "team's Secret hf-token (set by the platform team: teams[].secrets.hfToken)" in first
    assert "tenancy.hub.endpoint" in first


def test_the_sdk_examples_initializers_are_admitted(policies: dict[str, Obj]) -> None:
    """Trainer's examples/torchtune notebooks (v2.2.1): `HuggingFaceModelInitializer(storage_uri=...,
    access_token=...)`, which the SDK sends as env ACCESS_TOKEN; a dataset without options."""
    job = _with_initializer([{"name": "ACCESS_TOKEN", "value": "hf_personal"}])
    job["spec"]["initializer"]["dataset"] = {"storageUri": "hf://tatsu-lab/alpaca/data"}
    assert refusals(_policy(policies, "TrainJob"), job, namespace="nlp") == []


#: What a member could set on an initializer to run code beside the team token, or to send the token elsewhere:
#: a module or .pth on the team volume, a planted library, a warning category that imports a module, a proxy
#: with a planted CA, Hub settings that move caches or turn off checks, another data location.
ATTACK_ENV = (
    "PYTHONPATH",
    "PYTHONUSERBASE",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "PYTHONWARNINGS",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "https_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "HF_HOME",
    "HF_HUB_CACHE",
    "HF_HUB_DISABLE_SSL_VERIFICATION",
    "HF_HUB_ENABLE_HF_TRANSFER",
    "AWS_CA_BUNDLE",
    "STORAGE_URI",
)


@pytest.mark.parametrize("step", ["model", "dataset"])
@pytest.mark.parametrize("name", ATTACK_ENV)
def test_any_other_variable_on_an_initializer_is_refused_saying_which_are_allowed_and_why(
    policies: dict[str, Obj], name: str, step: str
) -> None:
    env = [{"name": "ACCESS_TOKEN", "value": "hf_personal"}, {"name": name, "value": "/workspace/team/evil"}]
    messages = refusals(_policy(policies, "TrainJob"), _with_initializer(env, step), namespace="nlp")
    assert len(messages) == 1, messages
    assert "may only set the initializers' data settings (" + ", ".join(INITIALIZER_DATA_ENV) in messages[0]
    assert "with the team's Hugging Face token, mount the team volume" in messages[0]


def test_every_data_setting_is_admitted_as_a_value_or_from_the_members_own_secret(policies: dict[str, Obj]) -> None:
    own = {"secretKeyRef": {"name": "my-s3", "key": "k"}}
    env = [
        {"name": n, "value": "v"} if i % 2 else {"name": n, "valueFrom": own}
        for i, n in enumerate(INITIALIZER_DATA_ENV)
    ]
    for step in ("model", "dataset"):
        assert refusals(_policy(policies, "TrainJob"), _with_initializer(env, step), namespace="nlp") == []


def _sdk_env(initializer: Obj) -> list[str]:
    return [e["name"] for e in initializer.get("env") or []]


def test_every_variable_the_pinned_sdk_writes_is_admitted(policies: dict[str, Obj]) -> None:
    """The kubeflow SDK's initializer types with every option set, turned into a TrainJob's initializer the way
    TrainerClient.train does (backends/kubernetes/utils.py get_model_initializer, get_dataset_initializer)."""
    from kubeflow.trainer.backends.kubernetes import utils as sdk
    from kubeflow.trainer.types import types as sdk_types

    s3 = {"endpoint": "http://minio:9000", "access_key_id": "a", "secret_access_key": "s", "region": "r"}
    models = [
        sdk.get_model_initializer(sdk_types.HuggingFaceModelInitializer(storage_uri="hf://o/m", access_token="hf_me")),
        sdk.get_model_initializer(sdk_types.S3ModelInitializer("s3://b/m", None, **s3, role_arn="arn:x")),
    ]
    datasets = [
        sdk.get_dataset_initializer(
            sdk_types.HuggingFaceDatasetInitializer(storage_uri="hf://o/d", ignore_patterns=["*.md"], access_token="t")
        ),
        sdk.get_dataset_initializer(sdk_types.S3DatasetInitializer("s3://b/d", None, **s3, role_arn="arn:x")),
    ]
    written: set[str] = set()
    for model, dataset in zip(models, datasets, strict=True):
        job = trainjob()
        job["spec"]["runtimeRef"] = {"name": "torchtune-llama3.2-1b"}
        job["spec"]["initializer"] = {"model": model.to_dict(), "dataset": dataset.to_dict()}
        written |= {*_sdk_env(job["spec"]["initializer"]["model"]), *_sdk_env(job["spec"]["initializer"]["dataset"])}
        assert refusals(_policy(policies, "TrainJob"), job, namespace="nlp") == [], job
    assert written == set(INITIALIZER_DATA_ENV) - {"METADATA_LOC"}  # the cache's, pinned with the cache runtime


@pytest.mark.parametrize(
    "initializer",
    [
        {"storageUri": "hf://org/model", "secretRef": {"name": "my-secret"}},  # its keys would be PYTHONPATH, ...
        {
            "storageUri": "s3://bucket/model",
            "env": [
                {"name": "ENDPOINT", "value": "http://my-pod.nlp:9000"},
                {"name": "SECRET_ACCESS_KEY", "valueFrom": TOKEN_REF},
            ],
        },
        {"storageUri": "hf://org/model", "env": [{"name": "ACCESS_TOKEN", "valueFrom": TOKEN_REF}]},
    ],
)
def test_a_secrets_keys_or_the_team_token_under_another_name_are_refused_on_the_initializers(
    policies: dict[str, Obj], initializer: Obj
) -> None:
    job = _with_initializer([])
    job["spec"]["initializer"] = {"model": initializer}
    messages = refusals(_policy(policies, "TrainJob"), job, namespace="nlp")
    assert len(messages) == 1, messages
    assert "set secretRef, or env reading Secret hf-token: the initializers hold the team's Hugging Face" in messages[0]
    assert "valueFrom: {secretKeyRef: {name: <your Secret>, key: <key>}}" in messages[0]


def test_the_team_token_in_the_trainer_step_is_refused(policies: dict[str, Obj]) -> None:
    job = trainjob()
    job["spec"]["trainer"] = {"env": [{"name": "T", "valueFrom": TOKEN_REF}]}
    (message,) = refusals(_policy(policies, "TrainJob"), job, namespace="nlp")
    assert "reads Secret hf-token, the team's Hugging Face token, outside the platform's initializers" in message


@pytest.mark.parametrize(
    "pod",
    [
        {"containers": [{"name": "node", "env": [{"name": "T", "valueFrom": TOKEN_REF}]}]},
        {"volumes": [{"name": "t", "secret": {"secretName": "hf-token"}}], "containers": [{"name": "node"}]},
        {
            "volumes": [{"name": "t", "projected": {"sources": [{"secret": {"name": "hf-token"}}]}}],
            "containers": [{"name": "node"}],
        },
    ],
)
def test_the_team_token_through_a_runtime_patch_or_a_members_runtime_is_refused(
    policies: dict[str, Obj], pod: Obj
) -> None:
    def token_refusals(messages: list[str]) -> list[str]:
        return [m for m in messages if "reads Secret hf-token" in m]

    assert token_refusals(refusals(_policy(policies, "TrainJob"), trainjob(pod=pod), namespace="nlp"))
    assert token_refusals(refusals(_policy(policies, "TrainingRuntime"), runtime(pod), namespace="vision"))
    initializer = {"containers": [{"name": "model-initializer", "envFrom": [{"secretRef": {"name": "hf-token"}}]}]}
    assert token_refusals(refusals(_policy(policies, "TrainingRuntime"), runtime(initializer), namespace="vision"))


def test_jobsets_and_pods_may_read_the_token_in_initializer_containers_only(policies: dict[str, Obj]) -> None:
    """What Trainer makes of the platform's torchtune runtime passes; the same read by the trainer pod does not."""
    tune = _runtimes(_stack({"endpoint": HUB}))["torchtune-llama3.2-1b"]
    jobset = {"metadata": {"name": "tj", "namespace": "nlp"}, "spec": tune["spec"]["template"]["spec"]}
    assert not [m for m in refusals(_policy(policies, "JobSet"), jobset, namespace="nlp") if "hf-token" in m]
    jobs = jobset["spec"]["replicatedJobs"]
    pod = next(j for j in jobs if j["name"] == "model-initializer")["template"]["spec"]["template"]
    as_pod = {"metadata": {"name": "p", "namespace": "nlp"}, "spec": pod["spec"]}
    assert not [m for m in refusals(_policy(policies, "Pod"), as_pod, namespace="nlp") if "hf-token" in m]
    node = next(j for j in jobs if j["name"] == "node")["template"]["spec"]["template"]["spec"]
    node["containers"][0]["env"] = [*node["containers"][0].get("env", []), {"name": "T", "valueFrom": TOKEN_REF}]
    assert [m for m in refusals(_policy(policies, "JobSet"), jobset, namespace="nlp") if "hf-token" in m]
