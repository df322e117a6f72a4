"""`bara eval calibrate`: floor picking, the dev split, and a real run on a slice of MTRAG-UN dev."""

from __future__ import annotations

import json
import math
import tomllib
from collections import Counter

import pytest
from typer.testing import CliRunner

from bara.eval.calibrate import Probe, choose_floors, evaluate_floors, half_of, pick_floor
from bara.eval.gate import read_tasks

N_TASKS, DISTRACTORS, MAX_TOKENS = 40, 80, 96


def test_pick_floor_drops_at_most_the_share():
    sims = [0.12, 0.2, 0.31, 0.33, 0.4, 0.41, 0.5, 0.55, 0.6, 0.7, 0.71, 0.72, 0.8, 0.81, 0.82, 0.9, 0.91, 0.92,
            0.93, 0.95]  # 20 values: 5% allows one below the floor
    floor = pick_floor(sims, 0.05)
    assert floor == 0.2 and sum(s < floor for s in sims) == 1
    assert pick_floor(sims, 0.0) == 0.12 and pick_floor([], 0.05) is None
    for q in (0.0, 0.05, 0.1, 0.25):
        f = pick_floor(sims, q)
        assert sum(s < f for s in sims) <= math.floor(q * len(sims))


def test_split_is_by_conversation_and_roughly_even(data_dir):
    tasks = read_tasks(data_dir / "mtrag" / "tasks.dev.jsonl", Counter())
    halves = Counter(half_of(t) for t in tasks)
    assert set(halves) == {"tune", "report"} and abs(halves["tune"] - halves["report"]) < 0.2 * len(tasks)
    assert [half_of(t) for t in tasks] == [half_of(t) for t in tasks]


def test_small_routes_take_the_pooled_floor():
    probes = [Probe(f"t{i}", "tune", "kb", ((f"d{i}", 0.3 + i / 100), ("x", 0.1)), (f"d{i}",)) for i in range(40)]
    probes += [Probe("c", "tune", "continuation", (("d", 0.9),), ("d",)),
               Probe("r", "report", "kb", (("d", 0.31), ("x", 0.2)), ("d",))]
    chosen = choose_floors(probes, 0.05, 30)
    assert chosen["kb"].source == "route" and chosen["kb"].floor == 0.32
    assert chosen["continuation"].source == "pooled" and chosen["continuation"].floor == 0.32
    floors = {r: c.floor for r, c in chosen.items() if c.floor is not None}
    out = evaluate_floors([p for p in probes if p.half == "report"], floors).as_dict()
    assert out["routes"]["kb"]["relevant_dropped"] == 1.0 and out["routes"]["kb"]["other_dropped"] == 1.0
    assert out["recall@5_no_floor"] == 1.0 and out["recall@5"] == 0.0


@pytest.fixture(scope="module")
def slice_files(tmp_path_factory, data_dir):
    folder = tmp_path_factory.mktemp("calibrate_slice")
    lines = (data_dir / "mtrag" / "tasks.dev.jsonl").read_text(encoding="utf-8").splitlines()
    picked = [line for line in lines if json.loads(line).get("contexts")][::5][:N_TASKS]
    wanted = {c["document_id"] for line in picked for c in json.loads(line)["contexts"]}
    corpus = (data_dir / "mtrag" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    others = [c for c in corpus if json.loads(c)["_id"] not in wanted][::9][:DISTRACTORS]
    (folder / "tasks.jsonl").write_text("\n".join(picked) + "\n")
    (folder / "corpus.jsonl").write_text("\n".join([c for c in corpus if json.loads(c)["_id"] in wanted] + others)
                                         + "\n")
    return folder


def test_cli_writes_floors_with_provenance_and_holds_on_the_tune_half(slice_files, tmp_path, monkeypatch):
    from bara.cli import app

    monkeypatch.setenv("BARA_CACHE_DIR", str(slice_files / "cache"))
    monkeypatch.setenv("BARA_EMBED_MAX_TOKENS", str(MAX_TOKENS))
    out_file = tmp_path / "floors.toml"
    args = ["eval", "calibrate", "--tasks", str(slice_files / "tasks.jsonl"), "--corpus",
            str(slice_files / "corpus.jsonl"), "--min-hits", "5", "--out", str(out_file), "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    floors = tomllib.loads(out_file.read_text())
    assert set(floors["floors"]) == {"floor_kb", "floor_continuation", "floor_general"}
    assert floors["floors"] == out["floors"]
    prov = floors["provenance"]
    assert len(prov["tasks_sha256"]) == 64 and prov["embedder"] and prov["embed_max_tokens"] == MAX_TOKENS
    for route, chosen in out["tune"].items():  # the defining property, on the half it was tuned on
        check = out["tune_check"]["routes"][route]
        if chosen["source"] == "route":
            assert check["relevant_dropped"] <= 0.05, route
    assert out["data"]["tasks"]["probed"] > 0 and 0.0 <= out["report"]["calibrated"]["recall@5"] <= 1.0
    bad = CliRunner().invoke(app, ["eval", "calibrate", "--tasks", str(tmp_path / "none.jsonl"), "--corpus",
                                   str(slice_files / "corpus.jsonl")])
    assert bad.exit_code == 2 and "does not exist" in bad.output
