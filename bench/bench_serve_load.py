"""Bounded loopback load test of `bara serve`: N concurrent users x T turns each, then a check that
every turn of every conversation is stored, in order (results go to docs/benchmarks.md).

    python bench/bench_serve_load.py --db /tmp/load.db                       # SQLite, 1 worker
    python bench/bench_serve_load.py --db postgresql://... --workers 2       # after `bara db start`
    python bench/bench_serve_load.py --compare --rounds 2                    # both, side by side, one run

The load starts once every worker has answered ``/api/health`` (its ``worker`` field; with several workers
the first answers while the others still load their model, and the client's keep-alive connections, all
opened at the start, would reach only the ready ones). ``--settle`` also waits until the server's
processes are idle (docs/benchmarks.md, issue 33 sessions 9-10). Each phase reports
``server_cpu_s``: the CPU seconds each process of the server (each worker) spent on its load.

``--think-ms N`` pauses N ms before each of a user's turns after the first (a person reading the answer):
back to back (0, the default) a turn also waits for the previous turn's learning writes, which a
single worker stores after the response (``serve_learn_after_response``).

It creates one API key per user in --db, ingests a few RFCs into the shared knowledge base when it is
empty (--kb-files), starts `bara serve` on a free loopback port as a subprocess, drives it with an
asyncio httpx client (each user's turns are sequential, users run concurrently), verifies, and stops
the server. It stops by itself: every request has a timeout and the whole run a deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

# The store is prepared in this process and served by a subprocess with PYTHONPATH set to this tree: both
# must be this tree's bara, not whichever one is installed (a checkout of an older commit run with another
# tree's editable install prepared a store the server then refused as newer).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MESSAGES = ["What does the HSTS max-age directive specify?", "and what about includeSubDomains?",
            "thanks, that helps!", "My name is {name} and I work as a site reliability engineer.",
            "What does MUST mean in RFC 2119?", "how is SHOULD different?", "We decided to use {name}-plan for TLS.",
            "What is HTTP over TLS?", "what did we decide?", "How does a client check the server certificate?",
            "ok", "remind me what my name is", "Which port does HTTPS use by default?"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prepare(db: str, users: int, kb_files: list[str]) -> list[str]:
    from bara.app import Bara
    from bara.memory.api_keys import KeyStore
    from bara.settings import load_settings

    with Bara(load_settings(db=db)) as bara:
        if kb_files and bara.store.count_chunks(owner="", collection="kb") == 0:
            bara.knowledge.ingest(kb_files)
        keys = KeyStore(bara.store)
        return [keys.create(f"load-{os.getpid()}-{i}").key for i in range(users)]


async def user_session(client: httpx.AsyncClient, key: str, n: int, turns: int, lat: list[float],
                       errors: list[str], think_s: float = 0.0) -> tuple[str | None, list[str]]:
    headers, cid, sent = {"Authorization": f"Bearer {key}"}, None, []
    for t in range(turns):
        if t and think_s:
            await asyncio.sleep(think_s)
        message = MESSAGES[(n + t) % len(MESSAGES)].format(name=f"User{n}") + f" [{t}]"
        body = {"message": message, **({"conversation_id": cid} if cid else {})}
        t0 = time.perf_counter()
        try:
            r = await client.post("/api/turns", json=body, headers=headers)
        except httpx.HTTPError as exc:
            errors.append(type(exc).__name__)
            continue
        lat.append(time.perf_counter() - t0)
        if r.status_code != 200:
            errors.append(f"HTTP {r.status_code}")
            continue
        cid = r.json()["conversation_id"]
        sent.append(message)
    return cid, sent


async def verify(client: httpx.AsyncClient, key: str, cid: str | None, sent: list[str]) -> bool:
    if cid is None:
        return not sent
    r = await client.get(f"/api/conversations/{cid}/turns", headers={"Authorization": f"Bearer {key}"})
    turns = r.json()["turns"] if r.status_code == 200 else []
    return [t["user"] for t in turns] == sent and all(t["assistant"] and t["trace"] for t in turns)


async def drive(url: str, keys: list[str], turns: int, deadline_s: float, think_s: float = 0.0) -> dict:
    lat: list[float] = []
    errors: list[str] = []
    limits = httpx.Limits(max_connections=len(keys) + 4)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:
        t0 = time.perf_counter()
        sessions = await asyncio.wait_for(asyncio.gather(
            *(user_session(client, k, n, turns, lat, errors, think_s) for n, k in enumerate(keys))), deadline_s)
        wall = time.perf_counter() - t0
        checks = await asyncio.gather(*(verify(client, k, cid, sent) for k, (cid, sent) in zip(keys, sessions, strict=False)))
    ms = sorted(x * 1e3 for x in lat)
    return {"users": len(keys), "turns_per_user": turns, "turns_ok": len(lat) - sum(e.startswith("HTTP") for e in errors),
            "errors": len(errors), "error_kinds": sorted(set(errors)), "wall_s": round(wall, 2),
            "turns_per_s": round(len(ms) / wall, 2), "p50_ms": round(statistics.median(ms), 1) if ms else None,
            "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 1) if ms else None,
            "conversations_complete_in_order": sum(checks), "conversations": len(keys),
            "stored_turns_expected": sum(len(s) for _, s in sessions)}


def start_server(db: str, port: int, workers: int, mode: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "bara.cli", "serve", "--db", db, "--port", str(port), "--workers", str(workers),
           "--mode", mode]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def wait_ready(url: str, proc: subprocess.Popen, workers: int = 1, timeout_s: float = 180) -> None:
    """Until ``/api/health`` answers, and with several workers until each has answered once (a new
    connection each time; ``worker`` in the answer is the process): the load starts on a fully started
    server. A server whose health has no ``worker`` field counts as ready at its first answer."""
    start, seen = time.monotonic(), set()
    while time.monotonic() - start < timeout_s:
        if proc.poll() is not None:
            raise SystemExit(f"server exited: {(proc.stderr.read() if proc.stderr else '')[-2000:]}")
        try:
            answer = httpx.get(f"{url}/api/health", timeout=2)
            if answer.status_code == 200:
                seen.add(answer.json().get("worker"))
                if None in seen or len(seen) >= workers:
                    return
                continue
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise SystemExit("server did not become ready")


def tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` and its descendants so far (Linux /proc)."""
    tick, parents, cpu = os.sysconf("SC_CLK_TCK"), {}, {}
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(p)], cpu[int(p)] = int(fields[1]), (int(fields[11]) + int(fields[12])) / tick
    tree, grew = {pid}, True
    while grew:
        more = {p for p, pp in parents.items() if pp in tree} - tree
        tree, grew = tree | more, bool(more)
    return sum(cpu.get(p, 0.0) for p in tree)


def process_cpu_s(pid: int) -> dict[int, float]:
    """CPU seconds of process ``pid`` and of each of its children (uvicorn's workers), by pid."""
    tick, out = os.sysconf("SC_CLK_TCK"), {}
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(p) == pid or int(fields[1]) == pid:
            out[int(p)] = (int(fields[11]) + int(fields[12])) / tick
    return out


def settle(proc: subprocess.Popen, idle_cpu_s: float = 0.1, timeout_s: float = 90) -> float:
    """Wait until the server's processes are idle (under ``idle_cpu_s`` of CPU in a second): with several
    workers, /api/health answers once the first is ready while the others still load their model, and the
    client's keep-alive connections, all opened at the start, would then all reach the first. Returns the
    seconds waited."""
    start, last = time.monotonic(), tree_cpu_s(proc.pid)
    while time.monotonic() - start < timeout_s:
        time.sleep(1.0)
        now = tree_cpu_s(proc.pid)
        if now - last < idle_cpu_s:
            break
        last = now
    return round(time.monotonic() - start, 1)


def run_one(db: str, workers: int, args: argparse.Namespace) -> dict:
    """One load phase against a fresh `bara serve` on ``db``: the result as a JSON-ready dict."""
    keys = prepare(db, args.users, args.kb_files)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start_server(db, port, workers, args.mode)
    try:
        wait_ready(url, proc, workers)
        settled = settle(proc) if args.settle else None
        before = process_cpu_s(proc.pid)
        result = asyncio.run(drive(url, keys, args.turns, args.deadline, args.think_ms / 1e3))
        after = process_cpu_s(proc.pid)  # what each process of the server spent on the load phase
        result["server_cpu_s"] = sorted((round(v - before.get(p, 0.0), 2) for p, v in after.items()), reverse=True)
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    backend = "postgresql" if db.startswith("postgres") else "sqlite"
    return {"backend": backend, "workers": workers, "mode": args.mode, "think_ms": args.think_ms,
            "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
            "load_avg": [round(x, 2) for x in os.getloadavg()], **({"settled_s": settled} if args.settle else {}),
            **result}


def compare(args: argparse.Namespace) -> None:
    """SQLite with one worker and PostgreSQL with --pg-workers, same knowledge base and client load,
    alternately for --rounds rounds, in one run: a local PostgreSQL is started in a fresh directory."""
    import tempfile

    from bara.store import pg_server

    work = Path(tempfile.mkdtemp(prefix="bara-load-cmp-", dir="/tmp"))
    local = pg_server.start(work / "pg")
    os.environ.update(BARA_PG_ADMIN_URL=local.owner_url, BARA_PG_APP_ROLE=pg_server.APP_ROLE)
    sqlite_db, pg_db = str(work / "load.db"), local.app_url
    try:
        for r in range(args.rounds):
            for db, workers in ((sqlite_db, 1), (pg_db, args.pg_workers))[:: 1 if r % 2 == 0 else -1]:
                print(json.dumps({"round": r, **run_one(db, workers, args)}), flush=True)
    finally:
        pg_server.stop(work / "pg")
        import shutil

        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--db", help="the store to load (SQLite path or postgresql:// URL); not with --compare")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--compare", action="store_true",
                    help="SQLite 1 worker against a fresh local PostgreSQL with --pg-workers, side by side")
    ap.add_argument("--pg-workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1, help="with --compare: alternate the two this many times")
    ap.add_argument("--users", type=int, default=32)
    ap.add_argument("--turns", type=int, default=25)
    ap.add_argument("--mode", default="gated")
    ap.add_argument("--deadline", type=float, default=900, help="seconds for the whole load phase")
    ap.add_argument("--settle", action="store_true",
                    help="before the load, wait until every worker has finished starting (its processes idle)")
    ap.add_argument("--think-ms", type=float, default=0.0, help="pause before each of a user's later turns")
    ap.add_argument("--kb-files", nargs="*", default=[str(Path(os.environ.get("BARA_DATA", "../shared/data")) / "rfc" / f)
                                                      for f in ("rfc2119.txt", "rfc2818.txt", "rfc6797.txt")])
    args = ap.parse_args()
    if args.compare == bool(args.db):
        ap.error("give --db (one store) or --compare (both backends), not both or neither")
    if args.compare:
        compare(args)
    else:
        print(json.dumps(run_one(args.db, args.workers, args)))


if __name__ == "__main__":
    main()
