"""Small knowledge bases the tests build more than once: a retriever over a few written texts, a Bara
over a private copy of the session's RFC store, and an MTRAG-UN slice (some dev tasks plus their
passages and distractors)."""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator, Mapping

from bara.app import Bara
from bara.memory.knowledge import KnowledgeBase
from bara.retrieval.hybrid import HybridRetriever
from bara.settings import Settings
from bara.store.sqlite import SQLiteStore


@contextmanager
def retriever_over(folder: Path, texts: Mapping[str, str], embedder) -> Iterator[HybridRetriever]:
    """Write ``texts`` (file name -> text) into ``folder``, ingest them, yield a hybrid retriever."""
    for name, text in texts.items():
        (folder / name).write_text(text)
    settings = Settings(db=str(folder / "kb.db"), cache_dir=folder / "cache")
    store = SQLiteStore(settings.db)
    try:
        KnowledgeBase(store, embedder, settings).ingest([folder])
        yield HybridRetriever(store, embedder, settings)
    finally:
        store.close()


@contextmanager
def rfc_bara(rfc_kb: Callable[[str], Path], embedder, name: str) -> Iterator[Bara]:
    """A Bara over ``rfc_kb(name)`` (a private copy of the small RFC store) with the session embedder."""
    db = rfc_kb(name)
    with Bara(Settings(db=str(db), cache_dir=db.parent), embedder=embedder) as bara:
        yield bara


def write_mtrag_slice(folder: Path, data_dir: Path, n_tasks: int, distractors: int, stride: int,
                      keep: Callable[[dict], bool] = lambda task: True) -> Path:
    """``n_tasks`` dev tasks spread over the file (those ``keep`` accepts) and a corpus of their
    passages plus every ``stride``-th other passage, at most ``distractors``; as tasks/corpus.jsonl."""
    lines = (data_dir / "mtrag" / "tasks.dev.jsonl").read_text(encoding="utf-8").splitlines()
    lines = [line for line in lines if keep(json.loads(line))]
    picked = lines[::len(lines) // n_tasks][:n_tasks]
    wanted = {c["document_id"] for line in picked for c in json.loads(line)["contexts"]}
    corpus = (data_dir / "mtrag" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    others = [c for c in corpus if json.loads(c)["_id"] not in wanted][::stride][:distractors]
    (folder / "tasks.jsonl").write_text("\n".join(picked) + "\n")
    (folder / "corpus.jsonl").write_text("\n".join([c for c in corpus if json.loads(c)["_id"] in wanted] + others)
                                         + "\n")
    return folder
