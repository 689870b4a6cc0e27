"""The stack files that broke the config contract, one or more per class, so none breaks it again. Each one failed
before (traceback, hang, silent drop, or accepted and then refused by the API server at `pulumi up`); now every
refusal is exit 2 naming the config path, and every accepted file renders."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from trainer_infra.cli import main

NS = "trainer-platform"
BASE: dict[str, Any] = {
    "kubernetes": {"version": "1.34"},
    "nodePools": [
        {
            "name": "h100",
            "backend": "kwok",
            "node": {"cpu": "96", "memory": "1536Gi", "accelerator": {"count": 8}},
            "kwok": {"layout": [1, 2, 2]},
        }
    ],
    "teams": [{"name": "nlp", "quota": {"h100": {"gpus": 16}}, "members": {"users": ["alice@example.com"]}}],
}
STATIC_POOL = {
    "name": "a100",
    "backend": "static",
    "node": {"cpu": "64", "memory": "512Gi", "accelerator": {"count": 4}},
    "topology": ["kubernetes.io/hostname"],
    "static": {"nodes": [{"name": "gpu-01"}, {"name": "gpu-02"}]},
}


def document(raw: dict[str, Any]) -> str:
    return yaml.safe_dump({"config": {f"{NS}:{k}": v for k, v in raw.items()}}, sort_keys=False)


def changed(**top: Any) -> dict[str, Any]:
    raw = copy.deepcopy(BASE)
    raw.update(copy.deepcopy(top))
    return raw


def team(**fields: Any) -> dict[str, Any]:
    return changed(teams=[{**BASE["teams"][0], **fields}])


def pool(**fields: Any) -> dict[str, Any]:
    return changed(nodePools=[{**BASE["nodePools"][0], **fields}])


def run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | bytes, command: str = "validate"
) -> tuple[int, str]:
    stack = tmp_path / "Pulumi.adversarial.yaml"
    if isinstance(content, bytes):
        stack.write_bytes(content)
    else:
        stack.write_text(content)
    args = [command, "--config-file", str(stack)]
    if command == "render":
        args += ["--out", str(tmp_path / "out")]
    code = main(args)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


# --- class 1: a documented backend crashed ----------------------------------------------------------


def test_static_pool_with_named_nodes_validates_and_renders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = changed(nodePools=[STATIC_POOL], teams=[{"name": "nlp", "quota": {"a100": {"gpus": 8}}}])
    raw["tenancy"] = {"images": {"allowedRegistries": ["registry.corp"]}}  # not the any-registry warning
    code, err = run(tmp_path, capsys, document(raw))  # warns only what to set on the kubelet it does not configure
    assert (code, err.count("WARNING"), "podPidsLimit: 4096" in err) == (0, 1, True), err
    code, _ = run(tmp_path, capsys, document(raw), "render")
    assert code == 0
    patches = [d for d in yaml.safe_load_all((tmp_path / "out" / "manifests.yaml").read_text()) if d["kind"] == "Node"]
    assert sorted(d["metadata"]["name"] for d in patches) == ["gpu-01", "gpu-02"]


# --- class 2: tracebacks become exit 2 with both sources ----------------------------------------------

REFUSED: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
    (
        "team named like kwok's namespace",
        changed(teams=[*BASE["teams"], {"name": "kwok-system"}]),
        ("teams[1].name", "nodePools[0]"),
    ),
    (
        "NFS server in kwok's namespace",
        changed(storage={"nfs": {"inClusterServer": {"enabled": True, "namespace": "kwok-system"}}}),
        ("storage.nfs.inClusterServer.namespace", "nodePools[0]"),
    ),
    (
        "two controllers in one namespace",
        changed(components={"kueue": {"namespace": "shared"}, "jobset": {"namespace": "shared"}}),
        ("components.kueue.namespace", "components.jobset.namespace"),
    ),
    (
        "kwok node names collide",
        changed(
            teams=[],
            nodePools=[
                {**BASE["nodePools"][0], "name": "a", "kwok": {"layout": [1, 1, 1]}},
                {
                    **BASE["nodePools"][0],
                    "name": "a-0",
                    "topology": ["example.com/rack", "kubernetes.io/hostname"],
                    "kwok": {"layout": [1, 1]},
                },
            ],
        ),
        ("nodePools[1]", "a-0-0-0"),
    ),
    (
        "two team runtimes of one name",
        changed(
            runtimes={
                "teams": [
                    {"team": "nlp", "runtime": "torch-distributed"},
                    {"team": "nlp", "runtime": "deepspeed-distributed", "name": "torch-distributed"},
                ]
            }
        ),
        ("runtimes.teams[1]",),
    ),
]


@pytest.mark.parametrize(("what", "raw", "paths"), REFUSED, ids=[c[0] for c in REFUSED])
def test_name_clashes_are_config_errors_naming_both_sources(
    what: str, raw: dict[str, Any], paths: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = run(tmp_path, capsys, document(raw))
    assert code == 2, err
    for path in paths:
        assert path in err, err


def test_file_decoding_and_yaml_types(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(tmp_path, capsys, document(BASE).encode().replace(b"alice", b"al\xffice"))
    assert code == 2 and "not UTF-8" in err and "line" in err
    # A date in chart values reaches Helm as the string the Pulumi CLI reads (YAML 1.2), not a crash.
    dated = document(BASE) + f"  {NS}:components:\n    kueue:\n      values:\n        since: 2024-01-01\n"
    assert run(tmp_path, capsys, dated)[0] == 0
    code, err = run(
        tmp_path, capsys, document(BASE) + f"  {NS}:components:\n    kueue:\n      values:\n        s: !!set {{a, b}}\n"
    )
    assert code == 2 and "components.kueue.values.s" in err


# --- class 3: bounded work --------------------------------------------------------------------------


def test_huge_inputs_are_refused_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bomb = f"  {NS}:components:\n    kueue:\n      values:\n        a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, 7):
        bomb += f"        a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n"
    big = copy.deepcopy(BASE)
    big["teams"][0]["members"]["users"] = [f"user{i:07d}@example.com" for i in range(60000)]
    cases = [
        (document(pool(kwok={"layout": [1000, 1000, 1000]})), "nodePools[0].kwok.layout"),
        (document(BASE) + bomb, "aliases expanded"),
        (document(big), "bytes"),
    ]
    for content, expected in cases:
        started = time.perf_counter()
        code, err = run(tmp_path, capsys, content)
        assert code == 2 and expected in err, err
        assert time.perf_counter() - started < 10


# --- class 4: values the API server or a controller would refuse at `pulumi up` ------------------------

API_REFUSES: list[tuple[str, dict[str, Any], str]] = [
    (
        "priority above int32",
        changed(queues={"priorityClasses": [{"name": "x", "value": 2**31}]}),
        "queues.priorityClasses[0].value",
    ),
    (
        "numNodes above int32",
        changed(runtimes={"overrides": {"torch-distributed": {"numNodes": 2**31}}}),
        "runtimes.overrides.torch-distributed.numNodes",
    ),
    ("negative quota", team(quota={"h100": {"gpus": 16, "cpu": "-1"}}), "teams[0].quota.h100.cpu"),
    ("negative fair-sharing weight", team(fairSharingWeight="-1"), "teams[0].fairSharingWeight"),
    (
        "duplicate taints",
        pool(taints=[{"key": "nvidia.com/gpu", "value": "a"}, {"key": "nvidia.com/gpu", "value": "b"}]),
        "nodePools[0].taints[1]",
    ),
    ("empty RBAC user", team(members={"users": [""]}), "teams[0].members.users[0]"),
    (
        "invalid Secret key",
        team(secrets={"extra": {"wandb": {"bad key": {"secure": "x"}}}}),
        "teams[0].secrets.extra.wandb",
    ),
    (
        "LimitRange min above max",
        team(limitRange={"min": {"cpu": "2"}, "max": {"cpu": "1"}}),
        "teams[0].limitRange.max.cpu",
    ),
    ("fractional pods quota", team(resourceQuota={"hard": {"pods": "1.5"}}), "teams[0].resourceQuota.hard.pods"),
    (
        "fractional GPU in runtime",
        changed(
            runtimes={
                "overrides": {"torch-distributed": {"resources": {"limits": {"nvidia.com/gpu": "0.5", "cpu": "1"}}}}
            }
        ),
        "runtimes.overrides.torch-distributed.resources.limits.nvidia.com/gpu",
    ),
    (
        "controller request above limit",
        changed(components={"kueue": {"resources": {"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}}}),
        "components.kueue.resources.requests.memory",
    ),
    (
        "unknown Kueue integration",
        changed(components={"kueue": {"frameworks": ["kubeflow.org/nosuchjob"]}}),
        "components.kueue.frameworks[0]",
    ),
    (
        "unknown Kueue feature gate",
        changed(components={"kueue": {"featureGates": {"NoSuchGate": True}}}),
        "components.kueue.featureGates.NoSuchGate",
    ),
    ("registry mirror port", changed(images={"registryMirror": "mirror.corp:99999"}), "images.registryMirror"),
    (
        "uppercase image repository",
        changed(runtimes={"overrides": {"torch-distributed": {"image": "ghcr.io/Corp/torch:v1"}}}),
        "runtimes.overrides.torch-distributed.image",
    ),
    (
        "accelerator without a domain",
        pool(node={"cpu": "96", "memory": "1536Gi", "accelerator": {"count": 8, "resource": "gpu"}}),
        "nodePools[0].node.accelerator.resource",
    ),
]


@pytest.mark.parametrize(("what", "raw", "path"), API_REFUSES, ids=[c[0] for c in API_REFUSES])
def test_values_the_api_server_refuses_are_refused_at_their_path(
    what: str, raw: dict[str, Any], path: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = run(tmp_path, capsys, document(raw))
    assert code == 2, err
    assert f"  {path}" in err, err


# --- class 5: nothing silently dropped ----------------------------------------------------------------

DROPPED: list[tuple[str, str, str]] = [
    (
        "extra Secret named hf-token",
        document(team(secrets={"hfToken": {"secure": "x"}, "extra": {"hf-token": {"HF_TOKEN": {"secure": "y"}}}})),
        "teams[0].secrets.extra.hf-token",
    ),
    ("duplicated top-level key", document(BASE) + f"  {NS}:teams:\n  - name: vision\n", "teams"),
    ("team storage without root storage", document(team(storage={"size": "10Gi"})), "teams[0].storage"),
    (
        "placement for an unknown runtime",
        document(changed(queues={"placement": {"runtimes": {"torch-distribute": {"required": "block"}}}})),
        "queues.placement.runtimes.torch-distribute",
    ),
    (
        "FSx fields on GKE Lustre",
        document(changed(storage={"lustre": {"provider": "gke", "subnetId": "subnet-1"}})),
        "storage.lustre.subnetId",
    ),
]


@pytest.mark.parametrize(("what", "content", "path"), DROPPED, ids=[c[0] for c in DROPPED])
def test_values_that_would_be_dropped_are_errors(
    what: str, content: str, path: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = run(tmp_path, capsys, content)
    assert code == 2, err
    assert path in err, err


def test_plaintext_secret_warns_with_the_exact_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(tmp_path, capsys, document(team(secrets={"hfToken": "hf_abc"})))
    assert code == 0
    assert "pulumi config set --secret --path 'trainer-platform:teams[0].secrets.hfToken' <value>" in err


# --- class 6: documented options pass the SDK and our own policy ------------------------------------------


def test_memory_only_runtime_limits_are_refused_before_the_sdk_breaks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    raw = changed(runtimes={"defaultResources": {"requests": {"cpu": "1"}, "limits": {"memory": "4Gi"}}})
    code, err = run(tmp_path, capsys, document(raw))
    assert code == 2 and "  runtimes.defaultResources: limits without cpu" in err, err


def test_data_cache_with_its_default_tag_passes_the_policy(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run(tmp_path, capsys, document(changed(dataCache={"enabled": True})))
    assert code == 0, err


# --- class 7: messages --------------------------------------------------------------------------------


def test_messages_name_the_file_the_real_path_and_a_did_you_mean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, err = run(tmp_path, capsys, document(changed(runtimes={"enabled": ["torch-distributd"]})))
    assert code == 2 and f"in {tmp_path}" in err and "in runtimes:" not in err
    for raw, path, hint in [
        (
            team(quota={"h100": {"gpus": 16, "lendingLimit": {"gpu": 8}}}),
            "teams[0].quota.h100.lendingLimit.gpu",
            "did you mean 'gpus'?",
        ),
        (
            changed(runtimes={"overrides": {"torch-distributed": {"imag": "x:v1"}}}),
            "runtimes.overrides.torch-distributed.imag",
            "did you mean 'image'?",
        ),
        (
            changed(queues={"placement": {"runtimes": {"torch-distributed": {"requird": "block"}}}}),
            "queues.placement.runtimes.torch-distributed.requird",
            "did you mean 'required'?",
        ),
        (pool(node={"cpu": "-1", "memory": "1536Gi", "accelerator": {"count": 8}}), "nodePools[0].node.cpu", ""),
    ]:
        code, err = run(tmp_path, capsys, document(raw))
        assert code == 2 and path in err and hint in err, err
    code, err = run(tmp_path, capsys, document(changed(teams=[BASE["teams"][0], BASE["teams"][0]])))
    assert code == 2 and err.startswith("1 error(s)"), err
