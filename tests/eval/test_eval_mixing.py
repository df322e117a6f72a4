"""Small-talk mixing of whole MTRAG-UN conversations (`bara eval ab --mix-smalltalk`), on the real dev
tasks and CLINC150 val: deterministic by seed, the share R holds, never last, only small_talk/meta."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest

from bara.errors import InputError
from bara.eval.gate import read_tasks
from bara.eval.mixing import MixConfig, base_turns, insert_counts, mix_conversations, read_smalltalk


@pytest.fixture(scope="module")
def tasks(data_dir):
    return read_tasks(data_dir / "mtrag" / "tasks.dev.jsonl", Counter())


def _mix(data_dir, tasks, rate=0.3, seed=7):
    clinc = data_dir / "clinc150"
    return mix_conversations(tasks, MixConfig(clinc / "val.jsonl", clinc / "domains.json", rate, seed))


def test_same_seed_same_conversations_other_seed_differs(data_dir, tasks):
    first, again, other = _mix(data_dir, tasks), _mix(data_dir, tasks), _mix(data_dir, tasks, seed=8)
    assert [c.turns for c in first] == [c.turns for c in again]
    assert [c.sha for c in first] == [c.sha for c in again]
    assert sum(a.turns != b.turns for a, b in zip(first, other, strict=False)) > len(tasks) // 2
    # a conversation's mix does not depend on the tasks after it (a --limit prefix is the same mix)
    assert [c.turns for c in _mix(data_dir, tasks[:40])] == [c.turns for c in first[:40]]


@pytest.mark.parametrize("rate", [0.1, 0.3, 0.5])
def test_share_of_inserted_turns_is_the_rate(data_dir, tasks, rate):
    mixed = _mix(data_dir, tasks, rate)
    total = sum(len(c.turns) for c in mixed)
    inserted = sum(t.inserted for c in mixed for t in c.turns)
    assert abs(inserted / total - rate) <= 1 / total + 1e-9
    for task, conv in zip(tasks, mixed, strict=False):  # each conversation rounds its own n R / (1 - R) down or up
        n = len(base_turns(task))
        m = sum(t.inserted for t in conv.turns)
        assert math.floor(n * rate / (1 - rate)) <= m <= math.ceil(n * rate / (1 - rate))


def test_never_last_and_the_original_conversation_is_kept(data_dir, tasks):
    mixed = _mix(data_dir, tasks, 0.5)
    for task, conv in zip(tasks, mixed, strict=False):
        assert not conv.turns[-1].inserted and conv.turns[-1].text == task.question
        assert [t for t in conv.turns if not t.inserted] == base_turns(task)
        assert all(t.reference_reply == "" for t in conv.turns if t.inserted)
    assert any(c.after_inserted for c in mixed) and not all(c.after_inserted for c in mixed)
    # some inserted turns open a conversation, some sit between two original turns
    assert any(c.turns[0].inserted for c in mixed)
    assert any(t.inserted and i > 0 and not c.turns[i - 1].inserted for c in mixed for i, t in enumerate(c.turns))


def test_reference_replies_follow_their_user_turn(tasks):
    task = next(t for t in tasks if len(t.history) >= 4)
    turns = base_turns(task)
    assert turns[0].text == task.history[0][1] and turns[0].reference_reply == task.history[1][1]
    assert turns[-1].reference_reply == ""  # the judged turn is answered by the mode itself


def test_inserted_utterances_are_small_talk_or_meta(data_dir, tasks):
    clinc = data_dir / "clinc150"
    domains = json.loads((clinc / "domains.json").read_text())
    allowed_intents = set(domains["small_talk"]) | set(domains["meta"])
    by_text = {}
    for line in (clinc / "val.jsonl").read_text().splitlines():
        row = json.loads(line)
        by_text.setdefault(row["text"].strip(), set()).add(row["intent"])
    pool = read_smalltalk(clinc / "val.jsonl", clinc / "domains.json")
    assert len(pool) > 100 and all(by_text[t] & allowed_intents for t in pool)
    inserted = {t.text for c in _mix(data_dir, tasks) for t in c.turns if t.inserted}
    assert inserted <= set(pool) and len(inserted) > 50


def test_counts_round_on_the_running_total():
    counts = insert_counts([1] * 10, 0.3)  # x = 3/7 each: the total is round(30/7) = 4
    assert sum(counts) == 4 and set(counts) <= {0, 1}
    assert insert_counts([3, 4], 0.0) == [0, 0]
    with pytest.raises(InputError):
        insert_counts([3], 1.0)


def test_unusable_small_talk_files_are_input_errors(data_dir, tmp_path):
    clinc = data_dir / "clinc150"
    (tmp_path / "banking.jsonl").write_text('{"text": "what is my balance", "intent": "balance"}\n')
    with pytest.raises(InputError, match="no utterance"):
        read_smalltalk(tmp_path / "banking.jsonl", clinc / "domains.json")
    with pytest.raises(InputError, match="domains"):
        read_smalltalk(clinc / "val.jsonl", tmp_path / "missing.json")
    with pytest.raises(InputError, match="does not exist"):
        read_smalltalk(tmp_path / "missing.jsonl", clinc / "domains.json")
