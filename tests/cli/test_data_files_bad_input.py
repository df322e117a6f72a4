"""Issue 16 QA, the data files a user hands over and the evaluations that read them: each test failed
before its fix (tests/cli/test_entry_points_bad_input.py has the stores, settings, library and output ones)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bara.store.sqlite import SQLiteStore
from tests.cli.test_cli_bad_input import assert_clean_exit, invoke


# ---- data files a user hands over: byte-order marks, stray bytes, damaged gzip, folders, nothing usable --
BOM = b"\xef\xbb\xbf"


def test_a_byte_order_mark_does_not_cost_a_chat_script_its_first_turn(tmp_path):
    from bara.cli.chat import read_script

    script = tmp_path / "s.jsonl"
    script.write_bytes(BOM + b'{"user": "what is tcp"}\n{"user": "and udp?"}\n')
    assert [line.text for line in read_script(script)] == ["what is tcp", "and udp?"]


def test_a_byte_order_mark_does_not_cost_a_dataset_its_first_row(tmp_path):
    from collections import Counter

    from bara.eval.beir import read_corpus
    from bara.eval.gate import json_rows

    rows = tmp_path / "rows.jsonl"
    rows.write_bytes(BOM + b'{"_id": "a", "text": "one"}\n{"_id": "b", "text": "two"}\n')
    problems: Counter = Counter()
    assert [r["_id"] for r, _ in json_rows(rows, problems)] == ["a", "b"] and not problems
    assert [d.id for d in read_corpus(rows, problems)] == ["a", "b"] and not problems


def test_a_byte_order_mark_does_not_hide_the_amfi_header(tmp_path):
    from bara.domains.funds.loader import _read_schemes

    schemes = tmp_path / "schemes.csv"
    schemes.write_bytes(BOM + b"scheme_code,isin_growth,isin_reinvest,scheme_name,category,fund_house\n"
                              b"100033,INF1,-,A Fund,Equity,A House\n")
    assert _read_schemes(schemes) == ([("100033", "INF1", "", "A Fund", "Equity", "A House")], 0)


def _beir(tmp_path: Path, corpus: bytes, qrels: bytes, gz: bool = False) -> list[str]:
    import gzip

    name = "corpus.jsonl.gz" if gz else "corpus.jsonl"
    (tmp_path / name).write_bytes(gzip.compress(corpus)[:-12] if gz else corpus)  # gz: cut off mid-stream
    (tmp_path / "q.jsonl").write_text('{"_id": "q1", "text": "caf\\u00e9 opening hours"}\n')
    (tmp_path / "qrels.tsv").write_bytes(qrels)
    return ["eval", "retrieval", "--corpus", str(tmp_path / name), "--queries", str(tmp_path / "q.jsonl"),
            "--qrels", str(tmp_path / "qrels.tsv"), "--arms", "bm25", "--json"]


def test_a_stray_latin1_byte_in_a_dataset_spoils_one_value_not_the_run(tmp_path):
    import json

    args = _beir(tmp_path, b'{"_id": "d1", "text": "caf\xe9 opens at nine"}\n{"_id": "d2", "text": "tea"}\n',
                 b"query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    result = invoke(args, tmp_path)
    assert_clean_exit(result, 0)
    assert json.loads(result.stdout)["n_docs"] == 2


def test_a_damaged_gzip_dataset_is_an_input_error(tmp_path):
    args = _beir(tmp_path, b'{"_id": "d1", "text": "tea"}\n' * 500, b"q1\td1\t1\n", gz=True)
    result = invoke(args, tmp_path)
    assert_clean_exit(result, 2)
    assert "not a readable gzip file" in result.output and "Aborted" not in result.output


def test_queries_without_any_judgment_are_an_input_error(tmp_path):
    args = _beir(tmp_path, b'{"_id": "d1", "text": "tea"}\n', b"\x93\x00\x01 binary, not qrels\n")
    result = invoke(args, tmp_path)
    assert_clean_exit(result, 2)
    assert "has a judgment" in result.output


@pytest.mark.parametrize("make", ["folder", "device"])
@pytest.mark.parametrize("args", [["chat", "--script", "PATH"], ["eval", "tools", "--bfcl", "PATH"],
                                  ["eval", "gate", "--data", "PATH"]], ids=lambda a: " ".join(a[:2]))
def test_a_folder_or_device_given_as_a_data_file_is_named_as_such(tmp_path, args, make):
    path = tmp_path if make == "folder" else Path("/dev/null")
    result = invoke([*(str(path) if a == "PATH" else a for a in args), "--db", str(tmp_path / "x.db")]
                    if args[0] == "chat" else [str(path) if a == "PATH" else a for a in args], tmp_path)
    assert_clean_exit(result, 2)
    assert ("is a folder" if make == "folder" else "not a regular file") in result.output
    assert "does not exist" not in result.output


@pytest.mark.parametrize("args", [["eval", "gate", "--data", "BIN"], ["eval", "tools", "--bfcl", "BIN"],
                                  ["eval", "ab", "--tasks", "BIN", "--corpus", "BIN", "--judge-sample", "0"]],
                         ids=lambda a: " ".join(a[:2]))
def test_an_evaluation_over_nothing_usable_exits_2(tmp_path, args):
    binary = tmp_path / "data.jsonl"
    binary.write_bytes(bytes(range(256)) * 8)
    result = invoke([binary.as_posix() if a == "BIN" else a for a in args] + ["--json"], tmp_path)
    assert_clean_exit(result, 2)
    assert f"{binary} holds no usable" in result.output and "malformed JSON line" in result.output


# ---- funds load: damaged AMFI files are refused, and a refused load keeps the previous data -------
def _amfi(tmp_path: Path, data_dir: Path, schemes_extra: str = "", navs: bytes | None = None) -> Path:
    import gzip

    folder = tmp_path / "amfi"
    folder.mkdir()
    lines = (data_dir / "amfi" / "schemes.csv").read_text().splitlines(keepends=True)
    (folder / "schemes.csv").write_text("".join(lines[:200]) + schemes_extra)
    raw = gzip.decompress((data_dir / "amfi" / "nav_history.csv.gz").read_bytes()).splitlines(keepends=True)
    (folder / "nav_history.csv.gz").write_bytes(navs if navs is not None else gzip.compress(b"".join(raw[:1000])
                                                                                             + b"2024-01-01,1\n"))
    return tmp_path


def test_cut_off_amfi_rows_are_counted_not_a_traceback(tmp_path, data_dir):
    from bara.domains.funds.loader import load_amfi

    with SQLiteStore(tmp_path / "x.db") as store:
        report = load_amfi(store, _amfi(tmp_path, data_dir, schemes_extra="123456,INF\n"))
    assert report.skipped_schemes == 1 and report.schemes == 199
    assert report.skipped_navs >= 1  # the NAV line with two fields


def test_a_damaged_nav_file_is_an_input_error(tmp_path, data_dir):
    from bara.domains.funds.loader import load_amfi
    from bara.errors import InputError

    with SQLiteStore(tmp_path / "x.db") as store, pytest.raises(InputError, match="not a readable gzip file"):
        load_amfi(store, _amfi(tmp_path, data_dir, navs=b"date,scheme_code,nav\n2024-01-01,1,2\n"))


def test_a_refused_funds_load_keeps_the_previous_data(tmp_path, data_dir):
    db = tmp_path / "f.db"
    assert_clean_exit(invoke(["funds", "load", "--no-index", "--json", "--db", str(db)], tmp_path), 0)
    with SQLiteStore(db, mode="read") as store:
        before = store.query("SELECT (SELECT COUNT(*) FROM funds_navs), (SELECT COUNT(*) FROM funds_transactions)")
    small = _amfi(tmp_path / "small", data_dir) if (tmp_path / "small").mkdir() is None else None
    result = invoke(["funds", "load", "--no-index", "--data", str(small), "--db", str(db)], tmp_path)
    assert_clean_exit(result, 2)
    assert "too little NAV history" in result.output
    with SQLiteStore(db, mode="read") as store:
        assert store.query("SELECT (SELECT COUNT(*) FROM funds_navs), (SELECT COUNT(*) FROM funds_transactions)") \
            == before and before[0][0] > 0


# ---- evaluation outputs are checked before the run, not after it ----------------------------------
def _mtrag(tmp_path: Path, data_dir: Path) -> list[str]:
    (tmp_path / "tasks.jsonl").write_text("".join((data_dir / "mtrag" / "tasks.dev.jsonl").open().readlines()[:2]))
    (tmp_path / "corpus.jsonl").write_text("".join((data_dir / "mtrag" / "corpus.jsonl").open().readlines()[:50]))
    return ["--tasks", str(tmp_path / "tasks.jsonl"), "--corpus", str(tmp_path / "corpus.jsonl"), "--json"]


@pytest.mark.parametrize("command,option,target,says", [
    ("ab", "--report", "file", "is a file"), ("calibrate", "--out", "folder", "is a folder"),
    ("calibrate", "--out", "file/x.toml", "is a file")])
def test_an_unusable_output_path_exits_2_before_the_run(tmp_path, data_dir, command, option, target, says):
    (tmp_path / "file").write_text("keep me\n")
    (tmp_path / "folder").mkdir()
    args = ["eval", command, *_mtrag(tmp_path, data_dir), option, str(tmp_path / target)]
    result = invoke(args + (["--judge-sample", "0"] if command == "ab" else []), tmp_path)
    assert_clean_exit(result, 2)
    assert says in result.output and result.stdout == ""  # nothing ran
    assert (tmp_path / "file").read_text() == "keep me\n"


def test_eval_retrieval_with_no_arm_exits_2(tmp_path):
    args = _beir(tmp_path, b'{"_id": "d1", "text": "tea"}\n', b"q1\td1\t1\n")
    args[args.index("bm25")] = " , "
    result = invoke(args, tmp_path)
    assert_clean_exit(result, 2)
    assert "names no arm" in result.output


def test_a_negative_mixing_seed_exits_2(tmp_path, data_dir):
    args = ["eval", "ab", *_mtrag(tmp_path, data_dir), "--turns", "all", "--judge-sample", "0", "--limit", "1",
            "--mix-smalltalk", str(data_dir / "clinc150" / "val.jsonl"), "--seed", "-1"]
    result = invoke(args, tmp_path)
    assert_clean_exit(result, 2)
    assert "--seed" in result.output


def test_the_library_refuses_a_negative_mixing_seed(data_dir):
    from bara.errors import InputError
    from bara.eval.mixing import MixConfig, mix_conversations

    clinc = data_dir / "clinc150"
    with pytest.raises(InputError, match="--seed -1 is not a seed"):
        mix_conversations([], MixConfig(clinc / "val.jsonl", clinc / "domains.json", 0.3, -1))


# ---- eval report: a saved run that is damaged or incomplete is named, not a KeyError or left out ----
@pytest.mark.parametrize("name,content,says", [("ab.json", "{}", "KeyError: 'modes'"),
                                               ("ab.json", "{bad", "Expecting property name"),
                                               ("ab.json", "[1]", "a JSON list"),
                                               ("gate.json", '{"accuracy": 1}', "KeyError: 'latency_ms'")])
def test_eval_report_names_an_unusable_saved_run(tmp_path, name, content, says):
    (tmp_path / name).write_text(content)
    result = invoke(["eval", "report", str(tmp_path)], tmp_path)
    assert_clean_exit(result, 2)
    assert f"{tmp_path / name} is not a usable saved run" in result.output and says in result.output
    assert not (tmp_path / "report.md").exists()


@pytest.mark.parametrize("command", ["retrieval", "ab"])
def test_a_cache_dir_that_is_a_file_is_a_config_error_for_evaluations(tmp_path, data_dir, command):
    from typer.testing import CliRunner

    from bara.cli import app

    (tmp_path / "cache").write_text("a file, not a folder\n")
    if command == "retrieval":
        args = _beir(tmp_path, b'{"_id": "d1", "text": "tea"}\n', b"q1\td1\t1\n")
    else:
        args = ["eval", "ab", *_mtrag(tmp_path, data_dir), "--judge-sample", "0", "--limit", "1"]
    result = CliRunner().invoke(app, args, env={"BARA_CACHE_DIR": str(tmp_path / "cache"), "BARA_MODEL": ""})
    assert_clean_exit(result, 2)
    assert "BARA_CACHE_DIR" in result.output and "evaluation index" in result.output


# ---- a JSON-escaped lone surrogate ("\ud800") in a data file: U+FFFD, not a traceback (stop 20) ----------
SURROGATE_LINE = '{"_id": "d1", "title": "T", "text": "alpha \\ud800 beta"}\n'


def test_an_escaped_lone_surrogate_in_a_dataset_spoils_one_value_not_the_run(tmp_path):
    import json

    args = _beir(tmp_path, SURROGATE_LINE.encode() + b'{"_id": "d2", "text": "tea"}\n',
                 b"query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    (tmp_path / "q.jsonl").write_text('{"_id": "q1", "text": "alpha \\udc80 beta"}\n')
    result = invoke(args, tmp_path)
    assert_clean_exit(result, 0)
    assert json.loads(result.stdout)["n_docs"] == 2


def test_every_reader_of_json_data_turns_an_escaped_lone_surrogate_into_a_replacement_character(tmp_path):
    from collections import Counter

    from bara.cli.chat import parse_script_line
    from bara.eval.beir import read_corpus
    from bara.eval.gate import read_labelled
    from bara.eval.locomo_data import load_locomo_all

    corpus = tmp_path / "c.jsonl"
    corpus.write_text(SURROGATE_LINE)
    assert [d.text for d in read_corpus(corpus, Counter())] == ["alpha \ufffd beta"]
    labelled = tmp_path / "u.jsonl"
    labelled.write_text('{"text": "hi \\udfff there", "needs_retrieval": false}\n')
    assert [u.text for u in read_labelled(labelled, None, Counter())] == ["hi \ufffd there"]
    assert parse_script_line(1, '{"user": "what is \\ud83d tcp"}').text == "what is \ufffd tcp"
    assert parse_script_line(2, '{"user": "a pair \\ud83d\\ude00 is one character"}').text == \
        "a pair \U0001F600 is one character"
    locomo = tmp_path / "conv.json"
    locomo.write_text('{"sample_id": "s1", "conversation": {"speaker_a": "A", "speaker_b": "B", "session_1": '
                      '[{"speaker": "A", "dia_id": "D1:1", "text": "I moved to \\ud800 Paris"}]}, '
                      '"qa": [{"question": "where did A move \\udc00?", "answer": "Paris", "category": 4}]}')
    (conv,) = load_locomo_all(locomo)
    assert conv.sessions[0].turns[0].text == "I moved to \ufffd Paris"
    assert conv.questions[0].question == "where did A move \ufffd?"
