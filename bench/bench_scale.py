"""How bara's costs grow: a knowledge base of 10^4-10^6 chunks and 10^4 users, on SQLite or PostgreSQL
(issue 34).

    python bench/bench_scale.py --backend sqlite|postgres --chunks N [--users N] [--store PATH] --json

The store at ``--store`` (a SQLite file, or a ``postgresql://`` URL) is built once and reused: a run finds
the chunks and users already there and only measures.

**How the store is built, without re-embedding a million texts** (``scale_build``'s docstring has the
detail). The pool is every text with a real MiniLM embedding in bara's cached evaluation indexes (SciFact's
5,183 abstracts, MTRAG-UN's 1,152 passages; ``--pool`` names others). A knowledge-base chunk recombines
sentences of 2-3 related pool texts (a random primary and 1-2 of its 16 nearest pool texts, Dirichlet
weights); its vector is the renormalised weighted mixture of their real embeddings plus Gaussian noise
(``--sigma`` a dimension, 0.01), renormalised: a continuum between related texts, like a real corpus, not
clusters of near-duplicates. Ten chunks make a document; batches of 2,000 documents are written in one
transaction through ``SQLiteStore.write_documents`` (``write_document``'s own rows: chunks, FTS5,
generations).

The users: ``--users`` of them, each with ``--qa`` Q&A pairs, ``--notes`` notes and one episodic session of
``--turns`` turns, written through bara's own tiers (``QAMemory.add``, ``NotesMemory.add``,
``EpisodicMemory.add_session``) with texts from MTRAG-UN's conversations (user questions, agent answers)
and vectors drawn from the pool the same way (a text's vector is a pool vector chosen by its hash, plus
noise): nothing is encoded.

**What is measured** (through bara's normal code: ``HybridRetriever`` over ``open_store``):
- search p50/p95 end to end with the query vector given, and each arm (lexical, dense, fusion) as the
  store times them (PostgreSQL runs both arms in one statement: there, each arm alone, the request with
  the other arm off, timed around the store's call), over ``--queries`` SciFact queries (real embeddings, the embedding cache);
- the first search (which loads or builds the dense graph of a large scope) apart;
- a gated turn p50/p95 (``Assistant.turn``, live query encoding, the generator a stub whose own time is
  subtracted) for users drawn from the 10^4;
- ingest throughput with real embedding on ``--ingest-sample`` pool texts (into a scratch store);
- resident memory (RSS now, and peak), store size on disk (file, WAL, the ``.ann`` graphs and the ``.lex`` lexicon);
- ``bara serve`` start-up: from launch until ``/api/health`` answers (the service warms the knowledge
  base before it listens), and its RSS then; first with the store's files evicted from the page cache
  (cold: read from the disk), then again (warm), each noting whether the clean-close mark was there;
- the growth exponent ``log(t2/t1)/log(n2/n1)`` against the results of the other sizes kept in
  ``--results`` (one JSON per backend and size).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale_build import Pool, build_heavy, build_kb, build_users, load_pool, rss_mb, scifact_queries  # noqa: E402

from bara.settings import Settings  # noqa: E402


def disk_mb(location: str, settings: Settings) -> float:
    if location.startswith("postgres"):  # the store's schema (tables, their indexes and TOAST), not the database
        from bara.store import open_store

        store = open_store(location, settings=settings)
        try:
            size = store.query("SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN"
                               " pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema()"
                               " AND c.relkind IN ('r', 'm')", ())[0][0]
            return round(float(size) / 2**20, 1)
        finally:
            store.close()
    return round(sum(p.stat().st_size for p in store_files(location)) / 2**20, 1)


def pct(values: list[float]) -> dict[str, float]:
    return {"p50": round(float(np.percentile(values, 50)), 3), "p95": round(float(np.percentile(values, 95)), 3)}


class Given:
    """The retriever is handed every query vector: this embedder is never asked."""

    dim, model_id, cache_key = 384, "given", "given"

    def embed(self, texts: Any) -> np.ndarray:
        raise AssertionError("the bench gives the query vector")


def measure_search(location: str, settings: Settings, queries: list[tuple[str, np.ndarray]]) -> dict[str, Any]:
    from bara.retrieval.hybrid import HybridRetriever
    from bara.store import open_store

    t0 = time.perf_counter()
    store = open_store(location, settings=settings)
    opened = time.perf_counter() - t0
    retriever = HybridRetriever(store, Given(), settings)
    try:
        t0 = time.perf_counter()
        retriever.search(queries[0][0], vector=queries[0][1])
        first = time.perf_counter() - t0
        for text, vec in queries[:20]:  # past lexical_in_memory_after_searches: what a running service has
            retriever.search(text, vector=vec)
        wait = getattr(store, "wait_for_indexes", None)
        if callable(wait):
            wait()
        total, arms = [], {"lexical": [], "dense": [], "fusion": []}
        for text, vec in queries:
            t0 = time.perf_counter()
            outcome = retriever.search(text, vector=vec)
            total.append((time.perf_counter() - t0) * 1e3)
            for arm in arms:
                arms[arm].append(float(outcome.timings_ms.get(arm, 0.0)))
        out = {"open_s": round(opened, 2), "first_search_s": round(first, 2), "search_ms": pct(total),
               "arms_ms": {a: pct(v) for a, v in arms.items() if any(v)}}
        if not out["arms_ms"]:  # one statement for both arms (PostgreSQL): each arm as a statement of its own
            out["arms_alone_ms"] = arms_alone(store, retriever, queries)
        return out
    finally:
        store.close()


def arms_alone(store: Any, retriever: Any, queries: list[tuple[str, np.ndarray]]) -> dict[str, Any]:
    """The store's search with the request the retriever sends, one arm switched off, timed around the
    store call: the lexical arm alone (``use_dense=False``), the dense arm alone (``use_lexical=False``)
    and both (the same hybrid statement the search ran)."""
    from dataclasses import replace

    sent: list[Any] = []
    search = store.search
    store.search = lambda request: sent.append(request) or search(request)
    try:
        for text, vec in queries:
            retriever.search(text, vector=vec)
    finally:
        store.search = search
    ms: dict[str, list[float]] = {"lexical": [], "dense": [], "both": []}
    for request in sent:
        for arm, req in (("lexical", replace(request, use_dense=False)),
                         ("dense", replace(request, use_lexical=False)), ("both", request)):
            t0 = time.perf_counter()
            search(req)
            ms[arm].append((time.perf_counter() - t0) * 1e3)
    return {a: pct(v) for a, v in ms.items()}


def measure_heavy(location: str, settings: Settings, user: str, queries: list[tuple[str, np.ndarray]]) -> dict[str, Any]:
    """A large memory scope's first search in a new process's store (its graph loaded, or every vector read
    when exact) and the searches after it, with the user-tier graph on (default) and off."""
    from bara.retrieval.hybrid import HybridRetriever
    from bara.store import open_store

    out: dict[str, Any] = {}
    for name, s in (("graph", settings), ("exact", settings.override(store_ann_min_user_chunks=0))):
        store = open_store(location, settings=s)
        try:
            retriever = HybridRetriever(store, Given(), s)
            t0 = time.perf_counter()
            retriever.search(queries[0][0], vector=queries[0][1], owners=(user,), collections=("qa",))
            first = (time.perf_counter() - t0) * 1e3
            ms = []
            for text, vec in queries[1:41]:
                t0 = time.perf_counter()
                retriever.search(text, vector=vec, owners=(user,), collections=("qa",))
                ms.append((time.perf_counter() - t0) * 1e3)
            out[name] = {"first_ms": round(first, 1), "search_ms": pct(ms)}
        finally:
            store.close()
    return out


def measure_turns(location: str, settings: Settings, users: list[str], turns: int, seed: int) -> dict[str, Any]:
    from bara.app import Bara
    from bara.turn.gated import Assistant
    from bara.retrieval.embedders import OnnxMiniLMEmbedder

    class Stub:
        name = "stub"

        def generate(self, prompt: Any) -> str:
            return ""

    questions = scifact_queries(settings, 200, skip=100)
    rng = random.Random(seed)
    embedder = OnnxMiniLMEmbedder(settings.embed_max_tokens, settings.embed_batch_size)  # live, uncached
    with Bara(settings.override(db=location), embedder=embedder) as bara:
        bara.warm()
        assistant = Assistant(bara, mode="gated")
        assistant.generator = Stub()  # type: ignore[assignment]
        ms, routes = [], {}
        for n in range(turns + 3):
            user = rng.choice(users)
            cid = assistant.open_conversation(user)
            t0 = time.perf_counter()
            trace = assistant.turn(user, questions[n % len(questions)][0], cid).trace
            wall = (time.perf_counter() - t0) * 1e3 - trace.latency_ms.get("generate", 0.0)
            bara.flush()
            if n >= 3:  # the first turns load the model's threads and the users' tiers' code paths
                ms.append(wall)
                routes[trace.route] = routes.get(trace.route, 0) + 1
        return {"turn_ms": pct(ms), "routes": routes}


def measure_ingest(settings: Settings, pool: Pool, sample: int) -> dict[str, Any]:
    """Real embedding (the default embedder, uncached) and ``KnowledgeBase``-style writes of ``sample`` texts."""
    from bara.retrieval.embedders import OnnxMiniLMEmbedder
    from bara.store.sqlite import SQLiteStore
    from bara.types import Chunk, Document, text_hash

    embedder = OnnxMiniLMEmbedder(settings.embed_max_tokens, settings.embed_batch_size)
    texts = [pool.texts[i % len(pool.texts)] + f" ({i})" for i in range(sample)]
    with tempfile.TemporaryDirectory() as tmp, SQLiteStore(Path(tmp) / "ingest.db") as store:
        t0 = time.perf_counter()
        for start in range(0, len(texts), 32):
            part = texts[start:start + 32]
            vectors = embedder.embed(part)
            with store.transaction():
                for j, (text, vec) in enumerate(zip(part, vectors, strict=True)):
                    chunk = Chunk(text=text, source=f"d{start + j}", ordinal=0, start=0, end=len(text))
                    store.write_document(Document(source=f"d{start + j}", content_hash=text_hash(text),
                                                  chunks=(chunk,)), vec[None, :])
        seconds = time.perf_counter() - t0
    return {"ingest_texts": sample, "ingest_s": round(seconds, 1), "ingest_chunks_per_s": round(sample / seconds, 1)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def store_files(location: str) -> list[Path]:
    """The SQLite file, its WAL and the graph and lexicon files beside it."""
    paths = [Path(location + s) for s in ("", "-wal", "-shm")]
    for folder in (Path(location + ".ann"), Path(location + ".lex")):
        if folder.is_dir():
            paths += [p for p in folder.rglob("*") if p.is_file()]
    return [p for p in paths if p.exists()]


def evict(location: str) -> float:
    """Drop the store's files (and only them) from the kernel's page cache, so the next start reads them
    from the disk (``posix_fadvise(DONTNEED)`` after ``fsync``: clean pages only); the MiB evicted."""
    total = 0
    for path in store_files(location):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            total += path.stat().st_size
        finally:
            os.close(fd)
    return round(total / 2**20, 1)


def measure_serve_both(location: str) -> dict[str, Any]:
    """``bara serve``'s start with the store's files evicted from the page cache (cold), then again (warm),
    and whether each found the clean-close mark (``<db>.clean``: no page check)."""
    from bara.store.sqlite_files import closed_clean

    out: dict[str, Any] = {}
    for phase in ("cold", "warm"):
        clean = location.startswith("postgres") or closed_clean(location)
        evicted = evict(location) if phase == "cold" and not location.startswith("postgres") else 0.0
        got = measure_serve(location)
        out[phase] = {**got, "clean_mark": clean, "evicted_mb": evicted}
    out["clean_mark_after"] = location.startswith("postgres") or closed_clean(location)
    # the flat keys of the JSON: the cold start, the worse case
    return {**{k: v for k, v in out["cold"].items() if k.startswith("serve_")}, "serve": out}


def measure_serve(location: str, timeout_s: float = 3600.0) -> dict[str, Any]:
    import httpx

    port = free_port()
    bara_bin = Path(sys.executable).with_name("bara")
    env = {**os.environ}
    t0 = time.perf_counter()
    proc = subprocess.Popen([str(bara_bin), "serve", "--db", location, "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        while time.perf_counter() - t0 < timeout_s:
            if proc.poll() is not None:
                raise RuntimeError(f"bara serve exited: {proc.stderr.read().decode()[-2000:] if proc.stderr else ''}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2).status_code == 200:
                    started = time.perf_counter() - t0
                    now, peak = rss_mb(proc.pid)
                    return {"serve_start_s": round(started, 2), "serve_rss_mb": now, "serve_peak_rss_mb": peak}
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"bara serve did not answer within {timeout_s} s")
    finally:
        proc.terminate()
        proc.wait(30)


def growth(results: Path, backend: str, chunks: int, mine: dict[str, Any]) -> dict[str, float]:
    """Exponent of each figure against the largest smaller size whose results are kept."""
    sizes = []
    for f in results.glob(f"{backend}-*.json"):
        m = re.fullmatch(rf"{backend}-(\d+)\.json", f.name)
        if m and int(m.group(1)) < chunks:
            sizes.append(int(m.group(1)))
    if not sizes:
        return {}
    other = json.loads((results / f"{backend}-{max(sizes)}.json").read_text())
    out = {"from_chunks": max(sizes)}
    for key in ("search_ms", "turn_ms"):
        a, b = other.get(key, {}).get("p50"), mine.get(key, {}).get("p50")
        if a and b:
            out[f"{key}_p50"] = round(math.log(b / a) / math.log(chunks / max(sizes)), 3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--backend", choices=("sqlite", "postgres"), required=True)
    ap.add_argument("--chunks", type=int, required=True, help="knowledge-base chunks (10^4, 10^5, 10^6)")
    ap.add_argument("--users", type=int, default=10_000)
    ap.add_argument("--store", default="", help="SQLite file or postgresql:// URL kept between runs")
    ap.add_argument("--pool", default="", help="a bara store of real embeddings (default: SciFact's eval index)")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--turns", type=int, default=40)
    ap.add_argument("--qa", type=int, default=5)
    ap.add_argument("--notes", type=int, default=3)
    ap.add_argument("--episode-turns", type=int, default=6)
    ap.add_argument("--sigma", type=float, default=0.01)
    ap.add_argument("--chunk-chars", type=int, default=700)
    ap.add_argument("--ingest-sample", type=int, default=10_000)
    ap.add_argument("--heavy-rows", type=int, default=0, help="also one user with this many Q&A pairs")
    ap.add_argument("--skip", default="", help="comma-separated: search, turns, ingest, serve")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a Settings field for the measurements (repeatable), e.g. lexical_in_memory=false")
    ap.add_argument("--results", default="/work/scale-stores/results")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.chunks < 10 or args.users < 0:
        print("error: --chunks must be at least 10 and --users at least 0", file=sys.stderr)
        raise SystemExit(2)
    location = args.store or str(Path(tempfile.gettempdir()) / f"bara-scale-{args.chunks}.db")
    if args.backend == "postgres" and not location.startswith("postgres"):
        print("error: --backend postgres needs --store postgresql://...", file=sys.stderr)
        raise SystemExit(2)
    try:
        settings = Settings(db=location, **dict(kv.split("=", 1) for kv in args.set))
    except ValueError as exc:
        print(f"error: --set takes KEY=VALUE of a Settings field ({exc})", file=sys.stderr)
        raise SystemExit(2) from exc
    skip = set(filter(None, args.skip.split(",")))
    pool = load_pool(settings, args.pool)
    built = build_kb(location, settings, pool, args.chunks, args.sigma, args.chunk_chars)
    users = build_users(location, settings, pool, args.users, args.qa, args.notes, args.episode_turns, args.sigma)
    queries = scifact_queries(settings, args.queries)
    out: dict[str, Any] = {"backend": args.backend, "chunks": args.chunks, "users": len(users), **built,
                           "settings": dict(kv.split("=", 1) for kv in args.set)}
    if args.heavy_rows:
        heavy = build_heavy(location, settings, pool, args.heavy_rows, args.sigma)
        out["heavy_scope"] = {"rows": args.heavy_rows, **measure_heavy(location, settings, heavy, queries)}
    if "search" not in skip:
        out.update(measure_search(location, settings, queries))
    if "turns" not in skip and users:
        out.update(measure_turns(location, settings, users, args.turns, 34))
    now, peak = rss_mb()
    out.update(rss_mb=now, peak_rss_mb=peak, disk_mb=disk_mb(location, settings))
    if "serve" not in skip:
        out.update(measure_serve_both(location))
    if "ingest" not in skip:
        out.update(measure_ingest(settings, pool, args.ingest_sample))
    out["load"] = [round(x, 2) for x in os.getloadavg()]
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    out["growth_exponent"] = growth(results, args.backend, args.chunks, out)
    name = f"{args.backend}-{args.chunks}" + ("-heavy" if "search" in skip else "")
    (results / f"{name}.json").write_text(json.dumps(out, indent=1))
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        report(out)


def report(out: dict[str, Any]) -> None:
    print(f"{out['backend']} · {out['chunks']:,} chunks · {out['users']:,} users · load {out['load']}")
    if "heavy_scope" in out:
        print(f"  a {out['heavy_scope']['rows']:,}-row memory scope: {out['heavy_scope']}")
    if "search_ms" not in out:
        return
    print(f"  search (vector given) p50 {out['search_ms']['p50']} ms  p95 {out['search_ms']['p95']} ms;"
          f" first search {out['first_search_s']} s")
    arms = [(a, "", v) for a, v in out.get("arms_ms", {}).items()]
    arms += [(a, " alone (a statement of its own)", v) for a, v in out.get("arms_alone_ms", {}).items()]
    for arm, how, v in arms:
        print(f"    {arm:8s}{how} p50 {v['p50']} ms  p95 {v['p95']} ms")
    if "turn_ms" in out:
        print(f"  gated turn p50 {out['turn_ms']['p50']} ms  p95 {out['turn_ms']['p95']} ms  routes {out['routes']}")
    if "ingest_chunks_per_s" in out:
        print(f"  ingest (real embedding, {out['ingest_texts']} texts) {out['ingest_chunks_per_s']} chunks/s")
    print(f"  RSS {out['rss_mb']} MiB (peak {out['peak_rss_mb']}), disk {out['disk_mb']} MiB")
    if "serve_start_s" in out:
        for phase, v in out.get("serve", {}).items():
            if isinstance(v, dict):
                print(f"  bara serve start ({phase} page cache) {v['serve_start_s']} s, RSS {v['serve_rss_mb']} MiB"
                      f" (peak {v['serve_peak_rss_mb']}), clean mark {v['clean_mark']}")
    if out.get("growth_exponent"):
        print(f"  growth exponent from {out['growth_exponent']['from_chunks']:,}: {out['growth_exponent']}")


if __name__ == "__main__":
    main()
