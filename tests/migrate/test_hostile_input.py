"""Hostile input never produces a traceback: any value anywhere in a job (a string for an object, a list for
a number, …) ends in a finding or a bad-input error naming a place, never in an exception."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.migrate.helpers import job, options_for, run
from trainer_infra.migrate.result import Status

KINDS = [("kubeflow.org/v1", "PyTorchJob"), ("kubeflow.org/v2beta1", "MPIJob"), ("kubeflow.org/v1", "JAXJob")]
JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.just([{"name": 1}]),
    st.just({"add": "SYS_ADMIN"}),
    st.just([{"hostPath": "x"}]),
)


def paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [path] if path else []
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(paths(v, (*path, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(paths(v, (*path, i)))
    return out


def rich(kind: tuple[str, str]) -> dict[str, Any]:
    obj = job(*kind)
    obj["spec"]["runPolicy"] = {"schedulingPolicy": {"queue": "default"}, "suspend": False}
    obj["metadata"]["labels"] = {"a": "b"}
    for spec in next(v for k, v in obj["spec"].items() if k.endswith("ReplicaSpecs")).values():
        pod = spec["template"]["spec"]
        pod["volumes"] = [{"name": "ws", "persistentVolumeClaim": {"claimName": "workspace"}}]
        pod["containers"][0].update(
            securityContext={"capabilities": {"drop": ["ALL"]}},
            ports=[{"containerPort": 1}],
            env=[{"name": "A", "value": "1"}],
            resources={"limits": {"cpu": "1"}},
        )
    return obj


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_any_value_anywhere_is_reported_not_raised(data: st.DataObject) -> None:
    kind = data.draw(st.sampled_from(KINDS))
    obj = rich(kind)
    target_path = data.draw(st.sampled_from(paths(obj)))
    mutated = copy.deepcopy(obj)
    node: Any = mutated
    for key in target_path[:-1]:
        node = node[key]
    node[target_path[-1]] = data.draw(JUNK)
    result = run(mutated, options=options_for(kind[1]))  # must not raise
    # the type checks name the field; the last-resort net in convert() is not what caught it
    assert not any(e.message.startswith("malformed job") for e in result.errors), result.errors
    assert result.trainjob is None or result.status in (Status.CLEAN, Status.ALLOWED)
