"""The trace format: a bad row is named by its line and field; unknown names list what is accepted; a job no
queue can ever hold is found before the replay, not waited on."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import render, stack_raw
from trainer_infra.simulate.facts import StackFacts, stack_facts
from trainer_infra.simulate.generate import TraceShape, generate
from trainer_infra.simulate.trace import TraceError, TraceRow, dump_trace, load_trace, parse_trace

ROOT = Path(__file__).resolve().parents[2]
HEADER = "submit,team,nodes,accelerators,duration,priority,runtime\n"


@pytest.fixture(scope="module")
def local() -> StackFacts:
    return stack_facts(render(stack_raw("local"), "local").manifests)


def test_the_example_trace_the_docs_name_loads_and_fits_the_local_stack(local: StackFacts) -> None:
    rows = load_trace(ROOT / "docs" / "simulate" / "example-trace.csv")
    local.check(rows)
    assert len(rows) >= 10
    assert all(local.never_admissible(r) is None for r in rows)


def test_every_malformed_row_is_named_by_line_and_field() -> None:
    text = HEADER + "0,nlp,2,8,3600,,\nx,nlp,2,8,3600,,\n10,nlp,0,8,-1,,\n"
    with pytest.raises(TraceError) as err:
        parse_trace(text, "csv")
    message = err.value.render()
    assert "line 3: submit" in message and "'x'" in message
    assert "line 4: nodes" in message and "line 4: duration" in message
    assert "line 2" not in message


def test_jsonl_rows_are_checked_the_same_way() -> None:
    text = '{"submit": 0, "team": "nlp", "nodes": 1, "accelerators": 8, "duration": 60}\n{"submit": 1, "team": "nlp"}\n'
    with pytest.raises(TraceError, match="line 2: nodes"):
        parse_trace(text, "jsonl")


def test_unknown_columns_and_unknown_json_keys_are_errors() -> None:
    with pytest.raises(TraceError, match="unknown column"):
        parse_trace("submit,team,nodes,accelerators,duration,gpus\n", "csv")
    with pytest.raises(TraceError, match="line 1: gpus"):
        parse_trace('{"submit":0,"team":"a","nodes":1,"accelerators":1,"duration":1,"gpus":2}\n', "jsonl")


def test_unknown_team_runtime_or_priority_lists_the_accepted_values(local: StackFacts) -> None:
    rows = parse_trace(HEADER + "0,nlpp,1,8,60,,\n0,nlp,1,8,60,urgent,pytorch\n", "csv")
    with pytest.raises(TraceError) as err:
        local.check(rows)
    message = err.value.render()
    assert "unknown team; accepted: nlp, vision" in message and "did you mean 'nlp'" in message
    assert "unknown priority; accepted: high, low, normal" in message
    assert "unknown runtime; accepted:" in message and "torch-distributed" in message


def test_jobs_no_queue_can_ever_hold_are_found_before_the_replay(local: StackFacts) -> None:
    # local: 32 nodes × 8 GPUs in 2 blocks of 16; nlp nominal 128 + vision lends 64; torch-distributed needs a block
    fits = TraceRow(submit=0, team="nlp", nodes=16, accelerators=8, duration=60)
    too_big = TraceRow(submit=0, team="nlp", nodes=32, accelerators=8, duration=60)
    vision_borrows = TraceRow(submit=0, team="vision", nodes=20, accelerators=8, duration=60, runtime="jax-distributed")
    wide_node = TraceRow(submit=0, team="nlp", nodes=1, accelerators=16, duration=60)
    block = TraceRow(submit=0, team="nlp", nodes=17, accelerators=4, duration=60)
    assert local.never_admissible(fits) is None
    assert "more than ClusterQueue nlp can ever hold (192" in str(local.never_admissible(too_big))
    assert local.never_admissible(vision_borrows) is None  # 128 own + nlp's 128 (no lending limit); no required level
    assert "largest node has 8" in str(local.never_admissible(wide_node))
    assert local.never_admissible(block) is None  # two 4-GPU pods per node: 17 pods fit in 9 nodes of a block
    assert "one trainer-platform.io/block domain" in str(
        local.never_admissible(TraceRow(submit=0, team="nlp", nodes=33, accelerators=4, duration=60))
    )


def test_the_generator_is_seeded_and_round_trips_through_both_formats() -> None:
    shape = TraceShape(300, {"a": 4, "b": 2, "c": 1, "d": 0.5}, priorities={"low": 1, "normal": 2})
    rows = generate(shape, seed=7)
    assert rows == generate(shape, seed=7) and rows != generate(shape, seed=8)
    assert parse_trace(dump_trace(rows, "csv"), "csv") == rows
    assert parse_trace(dump_trace(rows, "jsonl"), "jsonl") == rows
    sizes = {r.total_accelerators for r in rows}
    assert sizes <= {1, 2, 4, 8, 16, 32, 64, 128} and len(sizes) >= 5
    durations = sorted(r.duration for r in rows)
    assert durations[-1] > 20 * durations[len(durations) // 2]  # heavy tail
    demand = {t: sum(r.accelerator_seconds for r in rows if r.team == t) for t in "abcd"}
    assert demand["a"] > demand["d"]


def test_a_row_may_give_its_checkpoint_interval_and_a_trace_without_one_still_loads() -> None:
    text = HEADER.rstrip("\n") + ",checkpoint\n0,nlp,1,8,3600,,,900\n0,nlp,1,8,3600,,,0\n0,nlp,1,8,3600,,,\n"
    every, never, default = parse_trace(text, "csv")
    assert [r.checkpoint_interval(1800) for r in (every, never, default)] == [900, 0, 1800]
    with pytest.raises(TraceError, match="line 2: checkpoint"):
        parse_trace(HEADER.rstrip("\n") + ",checkpoint\n0,nlp,1,8,3600,,,-5\n", "csv")
    old = parse_trace(HEADER + "0,nlp,1,8,3600,,\n", "csv")
    assert old[0].checkpoint is None
    # written back, a trace without intervals has no such column: an older replay reads it as before
    assert dump_trace(old).splitlines()[0] == "submit,team,nodes,accelerators,duration,priority,runtime,name"
    assert parse_trace(dump_trace([every, never, default]), "csv") == [every, never, default]
    assert parse_trace(dump_trace([every, never], "jsonl"), "jsonl") == [every, never]
