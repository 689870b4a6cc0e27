"""`trainer-infra migrate` end to end on files: exit codes, messages naming file/document/path, output that is
deterministic and never partial."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.migrate.helpers import ROOT, job, local_target
from trainer_infra.migrate import command
from trainer_infra.migrate.source import MAX_DEPTH

PT = ("kubeflow.org/v1", "PyTorchJob")


def call(argv: list[str], capsys: pytest.CaptureFixture[str], api: Any = None) -> tuple[int, str, str]:
    p = argparse.ArgumentParser()
    command.add_arguments(p)
    args = p.parse_args(argv)
    code = command.run(args, lambda _: local_target(), lambda _: api)
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def write(path: Path, *objs: Any) -> Path:
    path.write_text(yaml.safe_dump_all(objs))
    return path


def test_converts_a_directory_to_yaml_on_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path / "a.yaml", job(*PT, name="a"), job("kubeflow.org/v1", "JAXJob", name="b"))
    (tmp_path / "c.json").write_text(json.dumps(job("kubeflow.org/v1", "XGBoostJob", name="c")))
    code, out, err = call([str(tmp_path)], capsys)
    assert code == 0, err
    docs = list(yaml.safe_load_all(out))
    assert [(d["kind"], d["metadata"]["name"], d["spec"]["runtimeRef"]["name"]) for d in docs] == [
        ("TrainJob", "a", "torch-distributed"),
        ("TrainJob", "b", "jax-distributed"),
        ("TrainJob", "c", "xgboost-distributed"),
    ]
    again = call([str(tmp_path)], capsys)[1]
    assert again == out


def test_list_objects_are_read_item_by_item(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = job(*PT, name="bad")
    del bad["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    write(tmp_path / "list.yaml", {"apiVersion": "v1", "kind": "List", "items": [job(*PT), bad]})
    code, _, err = call([str(tmp_path / "list.yaml")], capsys)
    assert code == 2
    assert (
        f"{tmp_path / 'list.yaml'}[0]: items[1].spec.pytorchReplicaSpecs.Worker.template.spec.containers: "
        "required: at least one container" in err
    )


BAD = [
    ("not: [yaml", "not YAML or JSON"),
    (
        "apiVersion: kubeflow.org/v1\nkind: SparkJob\nmetadata: {name: a, namespace: nlp}\n",
        "[0]: kind: unknown kind kubeflow.org/v1 SparkJob",
    ),
    ("- 1\n- 2\n", "[0]: expected an object, found list"),
    (
        "a: &a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
        + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(6)),
        "expands to more than 1000000 values",
    ),
    ("[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5), f"nested deeper than {MAX_DEPTH} levels"),
]


@pytest.mark.parametrize(("text", "message"), BAD)
def test_bad_input_exits_2_naming_the_place(
    text: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "in.yaml"
    src.write_text("---\n" + text if not text.startswith("[") else text)
    out_dir = tmp_path / "out"
    code, out, err = call([str(src), "--out", str(out_dir)], capsys)
    assert code == 2 and out == ""
    assert f"{src}" in err and message in err
    assert not out_dir.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["in.yaml"]


def field_errors() -> list[tuple[dict[str, Any], str]]:
    no_containers = job(*PT)
    no_containers["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"] = []
    no_image = job(*PT)
    del no_image["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["image"]
    queue = job(*PT)
    queue["spec"]["runPolicy"] = {"schedulingPolicy": {"queue": "gpu-queue"}}
    prio = job(*PT)
    prio["metadata"]["labels"] = {"kueue.x-k8s.io/priority-class": "system-node-critical"}
    typo = job(*PT)
    typo["spec"]["runPolicy"] = {"activeDeadlineSecond": 5}
    replica = job(*PT)
    replica["spec"]["pytorchReplicaSpecs"]["Wroker"] = replica["spec"]["pytorchReplicaSpecs"].pop("Worker")
    return [
        (no_containers, "spec.pytorchReplicaSpecs.Master.template.spec.containers: required: at least one container"),
        (no_image, "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].image: required"),
        (queue, "spec.runPolicy.schedulingPolicy.queue: 'gpu-queue' is not a LocalQueue in nlp of stack local"),
        (prio, "metadata.labels.kueue.x-k8s.io/priority-class: 'system-node-critical' is not a WorkloadPriorityClass"),
        (typo, "spec.runPolicy.activeDeadlineSecond: unknown field of spec.runPolicy"),
        (replica, "spec.pytorchReplicaSpecs.Wroker: unknown replica type 'Wroker' for PyTorchJob"),
        (
            job("kubeflow.org/v1", "TFJob"),
            "kind: TFJob: TFJob is a tensorflow job, and the stack local serves no runtime for framework tensorflow",
        ),
    ]


@pytest.mark.parametrize(("obj", "message"), field_errors())
def test_bad_jobs_exit_2_with_document_and_field(
    obj: dict[str, Any], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = write(tmp_path / "jobs.yaml", job(*PT, name="fine"), obj)
    code, out, err = call([str(src), "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and out == ""
    assert f"{src}[1]: {message}" in err
    assert not (tmp_path / "out").exists()


def test_lossy_jobs_exit_1_and_write_nothing_until_allowed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    obj = job(*PT)
    obj["spec"]["runPolicy"] = {"backoffLimit": 3, "cleanPodPolicy": "All"}
    src = write(tmp_path / "j.yaml", obj)
    out_dir = tmp_path / "out"
    code, _, err = call([str(src), "--out", str(out_dir)], capsys)
    assert code == 1 and not out_dir.exists()
    assert "reported spec.runPolicy.backoffLimit: restarts are the runtime's JobSet failurePolicy" in err
    assert "--allow-lossy spec.runPolicy.backoffLimit,spec.runPolicy.cleanPodPolicy" in err
    code, _, err = call(
        [str(src), "--out", str(out_dir), "--allow-lossy", "spec.runPolicy.backoffLimit,spec.runPolicy.cleanPodPolicy"],
        capsys,
    )
    assert code == 0, err
    written = yaml.safe_load((out_dir / "nlp" / "train.yaml").read_text())
    source = written["metadata"]["annotations"]["trainer-platform.io/migrated-from"]
    assert source == "kubeflow.org/v1/PyTorchJob nlp/train"


def test_out_dir_must_be_new_or_empty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write(tmp_path / "j.yaml", job(*PT))
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    code, _, err = call([str(src), "--out", str(tmp_path / "out")], capsys)
    assert code == 2 and "not an empty directory" in err
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["keep.txt"]


def test_duplicate_jobs_are_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write(tmp_path / "j.yaml", job(*PT), job(*PT))
    code, _, err = call([str(src)], capsys)
    assert code == 2 and "a second job nlp/train (first:" in err


def test_files_or_cluster_not_both(capsys: pytest.CaptureFixture[str]) -> None:
    assert call([], capsys)[0] == 2
    assert call(["x.yaml", "--from-cluster"], capsys)[0] == 2


def test_a_huge_file_is_refused_unread(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "huge.yaml"
    with src.open("w") as f:
        f.write("# " + "x" * (17 * 1024 * 1024) + "\n")
    code, _, err = call([str(src)], capsys)
    assert code == 2 and f"{src}: larger than 16 MiB" in err


def test_the_real_command_line(tmp_path: Path) -> None:
    """`trainer-infra migrate --stack local` as users run it: the stack file, the catalog, the exit code."""
    src = write(tmp_path / "j.yaml", job(*PT))
    proc = subprocess.run(
        [sys.executable, "-m", "trainer_infra", "migrate", "--stack", "local", str(src)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    (trainjob,) = yaml.safe_load_all(proc.stdout)
    assert trainjob["spec"]["runtimeRef"]["name"] == "torch-distributed"
    assert "→ clean (runtime torch-distributed" in proc.stderr
