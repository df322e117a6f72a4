"""Reading BEIR-layout datasets: corpus (.jsonl / .jsonl.gz), queries (.jsonl), qrels (.tsv).

Malformed lines are counted by reason, never fatal; a missing file is an
InputError naming it.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, ContextManager, Iterator

from bara.datafiles import json_value, open_text
from bara.errors import InputError


@dataclass(frozen=True)
class BeirDoc:
    id: str
    title: str
    text: str


@dataclass
class BeirData:
    corpus: list[BeirDoc]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    problems: Counter = field(default_factory=Counter)


def _open(path: Path) -> ContextManager[IO[str]]:
    """Plain or .gz; a missing, damaged or non-UTF-8 file is an InputError or U+FFFD (bara.datafiles)."""
    return open_text(path, "BEIR")


def _json_lines(path: Path, problems: Counter) -> Iterator[dict]:
    with _open(path) as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                row = json_value(line)
            except json.JSONDecodeError:
                problems[f"{path.name}: invalid JSON line"] += 1
                continue
            if isinstance(row, dict):
                yield row
            else:
                problems[f"{path.name}: line is not an object"] += 1


def read_corpus(path: Path, problems: Counter) -> list[BeirDoc]:
    docs = []
    for row in _json_lines(path, problems):
        doc_id, text = row.get("_id"), row.get("text")
        if not isinstance(doc_id, str) or not isinstance(text, str) or not (text.strip() or row.get("title")):
            problems[f"{path.name}: missing _id or text"] += 1
            continue
        docs.append(BeirDoc(doc_id, str(row.get("title") or ""), text))
    return docs


def read_queries(path: Path, problems: Counter) -> dict[str, str]:
    out = {}
    for row in _json_lines(path, problems):
        if isinstance(row.get("_id"), str) and isinstance(row.get("text"), str):
            out[row["_id"]] = row["text"]
        else:
            problems[f"{path.name}: missing _id or text"] += 1
    return out


def read_qrels(path: Path, problems: Counter) -> dict[str, dict[str, int]]:
    qrels: dict[str, dict[str, int]] = {}
    with _open(path) as fh:
        for n, line in enumerate(fh):
            parts = line.rstrip("\n").split("\t")
            if n == 0 and parts[0] in ("query-id", "query_id", "qid"):
                continue
            try:
                qid, did, score = parts[0], parts[1], int(parts[-1])
            except (IndexError, ValueError):
                problems[f"{path.name}: malformed qrels line"] += 1
                continue
            qrels.setdefault(qid, {})[did] = score
    return qrels


def load_beir(corpus: Path, queries: Path, qrels: Path) -> BeirData:
    problems: Counter = Counter()
    data = BeirData(read_corpus(corpus, problems), read_queries(queries, problems),
                    read_qrels(qrels, problems), problems)
    if not data.corpus:
        raise InputError(f"{corpus} holds no usable documents")
    return data
