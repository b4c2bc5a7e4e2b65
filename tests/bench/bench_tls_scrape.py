"""What TLS (and basic auth) costs a scrape of a large /metrics. Run by hand, never in the suite:

    .venv/bin/python -m tests.bench.bench_tls_scrape --gzip-mb 5 --scrapes 40 --runs 3

An ExpositionServer in this process holds a synthetic exposition whose gzip body is about
--gzip-mb MB (what Prometheus fetches at ~100k partitions); a client in its own process (as
Prometheus is) GETs /metrics with Accept-Encoding: gzip, --scrapes times on one keep-alive
connection (as Prometheus scrapes) and --scrapes / 4 times on a new connection each (a full
handshake each). Listeners, in rotation per run so drift hits them alike:
  - plain:     HTTP, as without --web.config.file;
  - tls:       TLS 1.3, server certificate only (ECDSA P-256);
  - mtls+auth: TLS 1.3, client certificate required and verified, basic auth (bcrypt cost 10,
               as `htpasswd -B` writes; verified once, then remembered).
Printed per listener: median and p90 wall time per scrape, the server process's CPU time per
scrape, and while the scrapes run, in the server process: how far a CPU-bound Python thread (a
stand-in for the poll) is slowed against the same thread alone, and how late a thread sleeping
1 ms at a time wakes (p99 and max: how long a poll thread can wait for the GIL behind a scrape).
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import random
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from mirrorlag.cli import SWITCH_INTERVAL_S
from mirrorlag.exporters.http import Exposition, ExpositionServer, GzipBody
from mirrorlag.exporters.web_config import load_web_config
from tests.web_pki import PASSWORD, USER, make_web_pki, password_hash


def exposition(gzip_mb: float) -> GzipBody:
    """Per-partition lines like mirrorlag's, with random values so they compress as real ones."""
    rng = random.Random(7)
    chunks, body = [], None
    while body is None or len(body.gzipped) < gzip_mb * 1e6:
        base = len(chunks) * 5000
        chunks.append("".join(
            f'mirrorlag_replication_record_lag{{source="src",target="dst",topic="topic-{i // 100}",partition="{i % 100}"}} '
            f"{rng.randint(0, 10**9)}\n"
            f'mirrorlag_replication_time_lag_seconds{{source="src",target="dst",topic="topic-{i // 100}",partition="{i % 100}"}} '
            f"{rng.random() * 1000:.3f}\n" for i in range(base, base + 5000)).encode())
        if len(chunks) % 20 == 0:
            body = GzipBody.compress(chunks)
    return body


def client(port: int, scrapes: int, tls: dict | None) -> dict:
    """In a child process: keep-alive scrapes, then scrapes on a fresh connection each."""
    context = None
    headers = {"Accept-Encoding": "gzip"}
    if tls is not None:
        context = ssl.create_default_context(cafile=tls["ca"])
        if tls.get("cert"):
            context.load_cert_chain(tls["cert"], tls["key"])
        if tls.get("password"):
            headers["Authorization"] = "Basic " + base64.b64encode(f"{USER}:{tls['password']}".encode()).decode()

    def connect() -> http.client.HTTPConnection:
        if context is None:
            return http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        return http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=30)

    def one(conn: http.client.HTTPConnection) -> tuple[float, int]:
        started = time.perf_counter()
        conn.request("GET", "/metrics", headers=headers)
        response = conn.getresponse()
        size = len(response.read())
        assert response.status == 200, response.status
        return time.perf_counter() - started, size

    conn = connect()
    one(conn)  # warm: the handshake and a first bcrypt are not part of a steady scrape
    kept = [one(conn)[0] for _ in range(scrapes)]
    conn.close()
    fresh = []
    for _ in range(max(1, scrapes // 4)):
        started = time.perf_counter()
        conn = connect()
        one(conn)
        conn.close()
        fresh.append(time.perf_counter() - started)
    return {"kept": kept, "fresh": fresh, "bytes": one(connect())[1]}


def spin_rate(stop: threading.Event, out: list[float]) -> None:
    """Pure-Python work, counted: a stand-in for the poll thread's share of the GIL."""
    n, started = 0, time.perf_counter()
    while not stop.is_set():
        for _ in range(1000):
            n += 1
    out.append(n / (time.perf_counter() - started))


def run_client(port: int, scrapes: int, tls: dict | None) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "tests.bench.bench_tls_scrape", "--client", str(port),
                             "--scrapes", str(scrapes), "--tls", json.dumps(tls)], stdout=subprocess.PIPE)


def probe(stop: threading.Event, late: list[float]) -> None:
    """Sleeps 1 ms at a time and notes how late it wakes: a thread that wants the GIL back
    (as the poll does) waits this long behind whoever holds it (and behind the OS)."""
    while not stop.is_set():
        started = time.perf_counter()
        time.sleep(0.001)
        late.append(time.perf_counter() - started - 0.001)


def beside(worker: Callable[[threading.Event, list[float]], None], during: subprocess.Popen[bytes] | None) -> list[float]:
    """What `worker` notes alone for 1 s (`during` None), or while the client process runs."""
    stop, out = threading.Event(), []
    thread = threading.Thread(target=worker, args=(stop, out))
    thread.start()
    if during is None:
        time.sleep(1.0)
    else:
        during.wait()
    stop.set()
    thread.join()
    return out


def measure(server: ExpositionServer, scrapes: int, tls: dict | None) -> dict:
    """Three client runs: beside the spinner (scrape times, the spinner's slowdown), beside the
    probe (its lateness), and alone (this process's CPU time per scrape served)."""
    alone = beside(spin_rate, None)[0]
    proc = run_client(server.port, scrapes, tls)
    spinning = beside(spin_rate, proc)[0]
    result = json.loads(proc.stdout.read())
    result["poll_slowdown"] = alone / spinning
    proc = run_client(server.port, scrapes, tls)
    late = sorted(beside(probe, proc))
    proc.wait()
    result["probe_late_p99_ms"] = late[int(0.99 * (len(late) - 1))] * 1000
    result["probe_late_max_ms"] = late[-1] * 1000
    cpu = time.process_time()
    run_client(server.port, scrapes, tls).wait()
    served = scrapes + max(1, scrapes // 4) + 2  # kept-alive, fresh, the warm-up and the size probe
    result["cpu_per_scrape_ms"] = (time.process_time() - cpu) / served * 1000
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gzip-mb", type=float, default=5.0)
    parser.add_argument("--scrapes", type=int, default=40)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--client", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--tls", default="null", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client is not None:
        print(json.dumps(client(args.client, args.scrapes, json.loads(args.tls))))
        return

    sys.setswitchinterval(SWITCH_INTERVAL_S)  # as `mirrorlag run` (its GIL hand-over)
    body = exposition(args.gzip_mb)
    print(f"/metrics: {body.size / 1e6:.1f} MB of text, {len(body.gzipped) / 1e6:.2f} MB gzip")
    idle = sorted(beside(probe, None))
    print(f"GIL probe alone: late p99 {idle[int(0.99 * (len(idle) - 1))] * 1000:.2f} ms, max {idle[-1] * 1000:.2f} ms")
    tmp = Path(tempfile.mkdtemp(prefix="bench-tls-"))
    pki = make_web_pki(tmp / "pki")
    tls_file, mtls_file = tmp / "tls.yml", tmp / "mtls.yml"
    tls_file.write_text("tls_server_config:\n  cert_file: pki/server.pem\n  key_file: pki/server.key\n")
    mtls_file.write_text(tls_file.read_text() + "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: pki/ca.pem\n"
                         f"basic_auth_users:\n  {USER}: {password_hash(cost=10)}\n")
    listeners = {
        "plain": (None, None),
        "tls": (load_web_config(tls_file), {"ca": str(pki.ca)}),
        "mtls+auth": (load_web_config(mtls_file), {"ca": str(pki.ca), "cert": str(pki.client[0]),
                                                   "key": str(pki.client[1]), "password": PASSWORD}),
    }
    servers = {}
    for name, (web, _) in listeners.items():
        server = ExpositionServer("127.0.0.1", 0, web=web)
        server.current = Exposition(metrics=body, ready=True)
        server.start()
        servers[name] = server
    results: dict[str, list[dict]] = {name: [] for name in listeners}
    order = list(listeners)
    for run in range(args.runs):
        for name in order if run % 2 == 0 else reversed(order):
            results[name].append(measure(servers[name], args.scrapes, listeners[name][1]))
    for server in servers.values():
        server.stop()

    print(f"{args.runs} runs x {args.scrapes} keep-alive scrapes (+{max(1, args.scrapes // 4)} on new connections); medians over runs")
    print("| listener | keep-alive p50 | keep-alive p90 | new connection p50 | server CPU / scrape "
          "| Python thread slowed | GIL probe late p99 / max |")
    print("|---|---|---|---|---|---|---|")
    for name, runs in results.items():
        def med(values: list[float]) -> float:
            return statistics.median(values)

        kept = [sorted(r["kept"]) for r in runs]
        p50 = med([statistics.median(k) for k in kept]) * 1000
        p90 = med([k[int(0.9 * (len(k) - 1))] for k in kept]) * 1000
        fresh = med([statistics.median(r["fresh"]) for r in runs]) * 1000
        cpu = med([r["cpu_per_scrape_ms"] for r in runs])
        slow = med([r["poll_slowdown"] for r in runs])
        p99_late = med([r["probe_late_p99_ms"] for r in runs])
        max_late = med([r["probe_late_max_ms"] for r in runs])
        print(f"| {name} | {p50:.1f} ms | {p90:.1f} ms | {fresh:.1f} ms | {cpu:.1f} ms | {slow:.2f}x "
              f"| {p99_late:.1f} / {max_late:.1f} ms |")


if __name__ == "__main__":
    main()
