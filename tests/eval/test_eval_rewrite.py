"""`bara eval rewrite` (issue 31): the QuReTeC term measure on hand-computed cases, the dev/test split,
the file checks (exit 2), and a real run of the CLI on a small CAsT 2022 slice with its passages."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from bara.eval.rewrite_data import half_of
from bara.eval.rewrite_metrics import TermCounts, added_terms, content_terms, s_stem, term_counts, term_scores


def test_s_stemmer_follows_harman():
    # ies -> y (not eies/aies); es -> e (not aes/ees/oes); s -> "" (not us/ss): first rule that applies
    assert [s_stem(w) for w in ("symptoms", "cities", "horses", "glasses", "virus", "eies", "shoes", "a")] == \
        ["symptom", "city", "horse", "glasse", "virus", "eie", "shoe", "a"]


def test_content_terms_drop_stop_words_case_and_possessives():
    assert content_terms("What are Lung Cancer's symptoms?") == {"lung", "cancer", "symptom"}


def test_gold_is_what_the_human_adds_to_the_users_words():
    assert added_terms("What are lung cancer's symptoms?", "What are its symptoms?") == {"lung", "cancer"}


def test_term_scores_by_hand():
    # turn 1: gold {throat, cancer}, predicted {throat, cancer, first} -> 2 correct of 3 predicted
    one = term_counts("Is it treatable?", "Is throat cancer treatable?", "Is it treatable? throat cancer first")
    assert one == TermCounts(predicted=3, gold=2, correct=2)
    # turn 2: not searched -> predicts nothing, its gold {sharks} still counts
    two = term_counts("Where do they live?", "Where do sharks live?", None)
    assert two == TermCounts(predicted=0, gold=1, correct=0)
    # P = 2/3, R = 2/3, F1 = 2/3 (micro over both turns)
    assert term_scores([one, two]) == {"term_precision": 0.6667, "term_recall": 0.6667, "term_f1": 0.6667}
    assert term_scores([]) == {"term_precision": 0.0, "term_recall": 0.0, "term_f1": 0.0}


def test_halves_are_by_conversation_and_a_topics_branches_stay_together():
    assert half_of("cast2022-132-branch1") == half_of("cast2022-132-branch2") == half_of("cast2022-132")
    halves = {half_of(f"c{i}") for i in range(20)}
    assert halves == {"dev", "test"}


@pytest.mark.parametrize("line, says", [
    ('{"id": "a", "turns": [{"user": "hi"}]}', "'rewrite' must be a non-empty string"),
    ('{"turns": [{"user": "hi", "rewrite": "hi"}]}', 'no string "id"'),
    ('{"id": "a", "turns": []}', 'no list of "turns"'),
    ('not json', "is not JSON"),
])
def test_a_malformed_file_exits_2_and_says_what_to_change(tmp_path, line, says):
    from bara.cli import app

    path = tmp_path / "conv.jsonl"
    path.write_text(line + "\n")
    result = CliRunner().invoke(app, ["eval", "rewrite", "--conversations", str(path), "--json"],
                                env={"BARA_CACHE_DIR": str(tmp_path / "cache")})
    assert result.exit_code == 2 and "error:" in result.output and says in result.output, result.output


def test_the_cli_on_a_cast_2022_slice(data_dir, tmp_path):
    from bara.cli import app

    lines = (data_dir / "rewrite" / "cast2022.jsonl").read_text().splitlines()[:3]
    convs = [json.loads(line) for line in lines]
    for conv in convs:
        conv["turns"] = conv["turns"][:4]
    wanted = {t["passage_id"] for c in convs for t in c["turns"] if t.get("passage_id")}
    corpus = [line for line in (data_dir / "rewrite" / "cast2022.corpus.jsonl").read_text().splitlines()
              if json.loads(line)["_id"] in wanted or len(wanted) < 20]
    (tmp_path / "conv.jsonl").write_text("\n".join(json.dumps(c) for c in convs) + "\n")
    (tmp_path / "corpus.jsonl").write_text("\n".join(corpus) + "\n")
    result = CliRunner().invoke(app, ["eval", "rewrite", "--conversations", str(tmp_path / "conv.jsonl"),
                                      "--corpus", str(tmp_path / "corpus.jsonl"), "--k", "5", "--json"],
                                env={"BARA_CACHE_DIR": str(tmp_path / "cache")})
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert {"n_turns", "systems", "turns"} <= set(out)
    assert set(out["systems"]) == {"bara", "raw", "last2", "first_last", "human"}  # no peer rewrites here
    for figures in out["systems"].values():
        assert {"term_precision", "term_recall", "term_f1", "recall@5"} <= set(figures)
    assert out["systems"]["human"]["term_f1"] == 1.0 and out["systems"]["raw"]["term_f1"] == 0.0
    assert out["n_turns"] == sum(len(c["turns"]) - 1 for c in convs)
    rows = out["turns"]
    assert len(rows) == sum(len(c["turns"]) for c in convs)
    assert {"conversation", "turn", "query", "searched", "hits"} <= set(rows[0])
    assert [r["turn"] for r in rows[:4]] == [0, 1, 2, 3]
    assert all(len(r["hits"]) <= 5 and (r["searched"] or not r["hits"]) for r in rows)
