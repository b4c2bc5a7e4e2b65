"""History upload to s3:// through s3fs, against moto's standalone S3 server on loopback (real HTTP),
reached through a proxy that can answer 500s, reset connections or vanish: segments arrive whole
and readable, the byte-rate quota holds at the server, faults lose nothing and are retried with
backoff, an interrupted multipart upload is never completed, a restarted sidecar uploads exactly
what is missing, and no secret ever shows in its log, /status or /metrics.

    .venv/bin/python -m pytest -q tests/integration/test_history_s3.py            # default suite
    .venv/bin/python -m pytest -q -s -m soak tests/integration/test_history_s3.py  # the longer quota runs
"""

from __future__ import annotations

import gc
import io
import logging
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
import s3fs

from mirrorlag.config import load_settings
from mirrorlag.embedded import free_port
from mirrorlag.history import History
from mirrorlag.history.layout import list_segments, marker_path, segment_name
from tests.helpers import eventually, scrape, status, wait_ready
from tests.integration.history_s3_server import FaultProxy, MotoServer
from tests.integration.test_history_cli import setup as history_config

MiB = 2**20
BASE = "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n"


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    server = MotoServer(tmp_path_factory.mktemp("moto") / "moto.log")
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def proxy(moto: MotoServer) -> Iterator[FaultProxy]:
    p = FaultProxy(moto.port)
    try:
        yield p
    finally:
        p.close()


@pytest.fixture
def bucket(moto: MotoServer) -> str:
    name = f"history-{uuid.uuid4().hex[:12]}"
    moto.client().create_bucket(Bucket=name)
    return name


def _assert(condition: bool, message: Any = "") -> None:
    assert condition, message


def write_segments(root: Path, count: int, size: int, start_ms: int = 1_772_409_600_000) -> list[Path]:
    """`count` real Parquet segments of about `size` bytes (random int64, uncompressed: incompressible)."""
    rng = np.random.default_rng(7)
    out = []
    for i in range(count):
        ts = start_ms + i * 1000
        path = root / "date=2026-03-02" / segment_name(ts)
        path.parent.mkdir(parents=True, exist_ok=True)
        table = pa.table({"v": pa.array(rng.integers(0, 2**62, size // 8, dtype=np.int64))})
        pq.write_table(table, path, compression="none")
        out.append(path)
    return out


def config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mm2.properties"
    path.write_text(BASE + text)
    return path


def s3_config(root: Path, bucket: str, endpoint: str, extra: str = "") -> str:
    return (f"mirrorlag.history.dir = {root}\nmirrorlag.history.upload.uri = s3://{bucket}/history\n"
            f"mirrorlag.history.upload.s3.endpoint.url = {endpoint}\n"
            "mirrorlag.history.upload.s3.access.key.id = AKIDTESTS3UPLOAD\n"
            "mirrorlag.history.upload.s3.secret.access.key = test-secret-0b1c\n"
            "mirrorlag.history.upload.s3.region = us-east-1\n" + extra)


def reader(moto: MotoServer) -> s3fs.S3FileSystem:
    return s3fs.S3FileSystem(endpoint_url=moto.url, key="inspector", secret="inspector", skip_instance_cache=True)


def assert_whole(moto: MotoServer, bucket: str, segments: list[Path], root: Path) -> None:
    """Each segment at the same relative path, same size, the same bytes and the same Parquet table."""
    objects = moto.client().list_objects_v2(Bucket=bucket, Prefix="history/").get("Contents", [])
    assert {o["Key"]: o["Size"] for o in objects} == {
        f"history/{p.relative_to(root).as_posix()}": p.stat().st_size for p in segments}
    fs = reader(moto)
    for p in segments:
        remote = fs.cat_file(f"{bucket}/history/{p.relative_to(root).as_posix()}")
        assert remote == p.read_bytes()
        assert pq.read_table(io.BytesIO(remote)).equals(pq.read_table(p))
    table = ds.dataset(f"{bucket}/history", filesystem=fs, format="parquet", partitioning="hive").to_table()
    assert table.num_rows == sum(pq.read_metadata(p).num_rows for p in segments)


def start_history(path: Path, **kwargs: Any) -> History:
    history = History(load_settings([path]).history, **kwargs)
    history.start()
    return history


# --- whole segments, and the quota as the server sees it -------------------------------------------


def measure_quota(tmp_path: Path, moto: MotoServer, proxy: FaultProxy, bucket: str, count: int,
                  quota: int, size: int = MiB) -> tuple[float, float]:
    """Upload `count` segments of about `size` bytes at `quota` B/s; return (achieved rate at the
    server / quota, the peak of the bytes the server had received by any moment / quota x elapsed)."""
    root = tmp_path / "h"
    segments = write_segments(root, count, size)
    total = sum(p.stat().st_size for p in segments)
    history = History(load_settings([config(tmp_path, s3_config(root, bucket, proxy.url,
                      f"mirrorlag.history.upload.max.bytes.per.second = {quota}\n"))]).history)
    start = time.monotonic()
    history.start()
    try:
        eventually(lambda: _assert(history.stats().pending_upload_segments == 0), timeout=2 * total / quota + 20,
                   interval=0.02)
    finally:
        history.close()
    s = history.stats()
    assert (s.upload_bytes_total, s.segments_uploaded_total, s.upload_failures_total) == (total, count, 0)
    assert_whole(moto, bucket, segments, root)
    # What reached the server, headers included: never ahead of the quota (a window's worth at
    # once, as KIP-956's SimpleRate allows, then quota x elapsed), and at the quota on average.
    received, overshoot = 0, 0.0
    for t, n in proxy.sent:
        received += n
        overshoot = max(overshoot, received / (quota * max(t - start, 1.0)))
    elapsed = proxy.sent[-1][0] - start
    achieved = proxy.bytes_sent() / elapsed
    print(f"\ns3 quota: {count} segments, {total} B at {quota} B/s in {elapsed:.2f} s: achieved "
          f"{achieved:.0f} B/s ({achieved / quota:.3f} x), peak received/allowed {overshoot:.3f}, "
          f"throttled {s.upload_throttle_seconds_total:.2f} s")
    return achieved / quota, overshoot


def test_segments_arrive_whole_and_the_quota_holds_at_the_server(tmp_path, moto, proxy, bucket):
    ratio, overshoot = measure_quota(tmp_path, moto, proxy, bucket, count=5, quota=MiB)
    assert 0.85 <= ratio <= 1.02 and overshoot <= 1.02


@pytest.mark.soak
def test_the_quota_holds_over_a_minute(tmp_path, moto, proxy, bucket):
    ratio, overshoot = measure_quota(tmp_path, moto, proxy, bucket, count=60, quota=MiB)
    assert 0.95 <= ratio <= 1.02 and overshoot <= 1.02


@pytest.mark.soak
def test_the_quota_holds_with_multipart_segments(tmp_path, moto, proxy, bucket):
    """12 MiB segments go as three parts, each sent when its 5 MiB are in the buffer."""
    ratio, overshoot = measure_quota(tmp_path, moto, proxy, bucket, count=4, quota=4 * MiB, size=12 * MiB)
    assert 0.9 <= ratio <= 1.02 and overshoot <= 1.02


# --- faults -------------------------------------------------------------------------------------------


def test_500s_resets_and_a_vanished_server_lose_nothing_and_are_retried_with_backoff(
        tmp_path, moto, proxy, bucket, caplog, monkeypatch):
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # the SDK's own retries off: every fault reaches us
    caplog.set_level(logging.INFO, logger="mirrorlag.history")
    root = tmp_path / "h"
    segments = write_segments(root, 3, 100_000)
    proxy.set("error")
    history = start_history(config(tmp_path, s3_config(root, bucket, proxy.url)), upload_retry_initial_s=0.2)
    try:
        seen = []
        for mode in ("error", "reset", "down"):
            if mode == "down":
                proxy.down()
            else:
                proxy.set(mode)
            before = history.stats().upload_failures_total
            eventually(lambda: _assert(history.stats().upload_failures_total > before), timeout=15, interval=0.05)
            s = history.stats()
            assert not s.healthy and s.pending_upload_segments == 3 and s.segments_uploaded_total == 0
            seen.append(s.last_error)
            assert "Traceback" not in s.last_error and "\n" not in s.last_error
            assert not moto.client().list_objects_v2(Bucket=bucket).get("Contents")
        failed_at = time.monotonic()
        proxy.up()
        proxy.set("pass")
        eventually(lambda: _assert(history.stats().pending_upload_segments == 0), timeout=30, interval=0.05)
        recovered_in = time.monotonic() - failed_at
    finally:
        history.close()
    s = history.stats()
    assert s.healthy and s.segments_uploaded_total == 3 and s.last_error == ""
    # Backoff, not a hot loop: 0.2 s doubling per failure (each attempt also spends the s3fs
    # client's own short retries on a reset).
    assert 3 <= s.upload_failures_total <= 12, s.upload_failures_total
    assert recovered_in < 30
    assert_whole(moto, bucket, segments, root)
    messages = [r.getMessage() for r in caplog.records if r.name == "mirrorlag.history"]
    assert sum(" failed: " in m for m in messages) == 1, messages
    assert sum("recovered after" in m for m in messages) == 1, messages
    print(f"\nfaults seen: {seen}")


def test_an_interrupted_multipart_upload_is_never_completed(tmp_path, moto, proxy, bucket, monkeypatch):
    """12 MiB: three 5 MiB parts. The connection dies after the first part: nothing appears at the
    key, the open upload is aborted before the retry, and the retry completes the whole segment."""
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    root = tmp_path / "h"
    (segment,) = write_segments(root, 1, 12 * MiB)
    key = f"history/{segment.relative_to(root).as_posix()}"
    s3 = moto.client()
    history = start_history(config(tmp_path, s3_config(root, bucket, proxy.url,
                            f"mirrorlag.history.upload.max.bytes.per.second = {8 * MiB}\n")),
                            upload_retry_initial_s=0.5)
    try:
        def a_part_is_in() -> None:
            uploads = s3.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
            assert uploads and s3.list_parts(Bucket=bucket, Key=key, UploadId=uploads[0]["UploadId"]).get("Parts")

        eventually(a_part_is_in, timeout=10, interval=0.02)
        proxy.set("reset")
        eventually(lambda: _assert(history.stats().upload_failures_total >= 1), timeout=15, interval=0.02)
        assert s3.list_multipart_uploads(Bucket=bucket).get("Uploads")  # the abort could not get through
        assert "Contents" not in s3.list_objects_v2(Bucket=bucket)  # and nothing partial was completed
        proxy.set("pass")
        gc.collect()  # an abandoned s3fs file closes itself when collected: it must not complete
        for o in s3.list_objects_v2(Bucket=bucket).get("Contents", []):
            assert o["Size"] == segment.stat().st_size, o
        eventually(lambda: _assert(marker_path(segment).exists()), timeout=20, interval=0.02)
    finally:
        history.close()
    assert_whole(moto, bucket, [segment], root)
    assert not s3.list_multipart_uploads(Bucket=bucket).get("Uploads")  # the open one was aborted
    assert history.stats().upload_failures_total >= 1


def test_a_start_aborts_the_multipart_upload_a_killed_process_left_open(tmp_path, moto, bucket):
    root = tmp_path / "h"
    (segment,) = write_segments(root, 1, 1000)
    key = f"history/{segment.relative_to(root).as_posix()}"
    s3 = moto.client()
    upload_id = s3.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    s3.upload_part(Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=1, Body=b"x" * 100)
    history = start_history(config(tmp_path, s3_config(root, bucket, moto.url)))
    try:
        eventually(lambda: _assert(marker_path(segment).exists()), timeout=10, interval=0.02)
    finally:
        history.close()
    assert not s3.list_multipart_uploads(Bucket=bucket).get("Uploads")
    assert_whole(moto, bucket, [segment], root)


def test_an_unreachable_endpoint_is_one_line_and_never_a_traceback(tmp_path, caplog, monkeypatch):
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    caplog.set_level(logging.DEBUG)
    root = tmp_path / "h"
    write_segments(root, 1, 1000)
    closed = f"http://127.0.0.1:{free_port()}"
    history = start_history(config(tmp_path, s3_config(root, "nowhere", closed)), upload_retry_initial_s=30)
    try:
        eventually(lambda: _assert(history.stats().upload_failures_total == 1), timeout=30, interval=0.05)
    finally:
        history.close()
    (line,) = [r.getMessage() for r in caplog.records if r.name == "mirrorlag.history" and r.levelno >= logging.ERROR]
    assert "uploading segments failed: " in line and "Could not connect" in line and "\n" not in line, line
    assert not any(r.exc_info for r in caplog.records if r.name.startswith("mirrorlag"))
    assert history.stats().pending_upload_segments == 1


# --- the real sidecar: credentials, secrets, restart ---------------------------------------------

SECRETS = {
    "config secret": "Cfg-S3-Secret-5d2a91",
    "config token": "Cfg-S3-Token-e07b44",
    "env secret": "Env-S3-Secret-18c3f6",
    "env token": "Env-S3-Token-a9d270",
}


def leaks(blob: bytes | str) -> list[str]:
    text = blob.decode("latin-1") if isinstance(blob, bytes) else blob
    return [name for name, secret in SECRETS.items() if secret in text]


def launch(configs: list[Path], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    args = [a for c in configs for a in ("--config", str(c))]
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", "mirrorlag", "--log-level", "DEBUG", "run", *args],
                                stdout=out, stderr=out, env=env)


def shown(port: int) -> dict[str, bytes]:
    return {path: urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5).read()
            for path in ("/metrics", "/status")}


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0


@pytest.mark.integration
def test_sidecar_credentials_from_keys_and_env_no_secret_shown_restart_uploads_what_is_missing(
        tmp_path, clusters, moto, proxy, bucket):
    history = tmp_path / "history"
    bare = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    seen: dict[str, bytes | str] = {}

    # Run 1: credentials from our keys (the AWS_* variables hold others, unused). The endpoint
    # answers 500s at first, then serves, then vanishes for the SIGTERM.
    base, port, _ = history_config(tmp_path, clusters, history)  # history in `history`, one segment per 10 min
    upload = f"mirrorlag.history.upload.uri = s3://{bucket}/history\n"
    keys = (upload + "mirrorlag.history.segment.ms = 1000\n"
            f"mirrorlag.history.upload.s3.endpoint.url = {proxy.url}\n"
            "mirrorlag.history.upload.s3.region = eu-west-1\n"
            "mirrorlag.history.upload.s3.access.key.id = AKIDFROMCONFIG\n"
            f"mirrorlag.history.upload.s3.secret.access.key = {SECRETS['config secret']}\n"
            f"mirrorlag.history.upload.s3.session.token = {SECRETS['config token']}\n")
    path1 = tmp_path / "run1.properties"
    path1.write_text(keys)
    env1 = {**bare, "AWS_ACCESS_KEY_ID": "AKIDFROMENV", "AWS_SECRET_ACCESS_KEY": SECRETS["env secret"],
            "AWS_SESSION_TOKEN": SECRETS["env token"], "AWS_MAX_ATTEMPTS": "1"}
    proxy.set("error")
    log1 = tmp_path / "run1.log"
    proc = launch([base, path1], log1, env1)
    try:
        wait_ready(port, proc)
        eventually(lambda: _assert(scrape(port)[("mirrorlag_history_upload_failures_total", ())] >= 1), timeout=20)
        eventually(lambda: _assert(status(port)["history"]["last_error"] != ""), timeout=5)
        seen.update({f"run 1 failing {k}": v for k, v in shown(port).items()})
        proxy.set("pass")
        eventually(lambda: _assert(status(port)["history"]["segments_uploaded_total"] >= 2
                                   and status(port)["history"]["healthy"]), timeout=20)
        metrics = scrape(port)
        assert metrics[("mirrorlag_history_upload_failures_total", ())] >= 1
        assert metrics[("mirrorlag_history_healthy", ())] == 1
        seen.update({f"run 1 recovered {k}": v for k, v in shown(port).items()})
        proxy.down()  # gone: segments pile up; SIGTERM while an upload may be under way
        eventually(lambda: _assert(status(port)["history"]["pending_upload_segments"] >= 2), timeout=20)
    finally:
        stop(proc)
    assert proxy.access_keys == {b"AKIDFROMCONFIG"} and proxy.tokens == {SECRETS["config token"].encode()}
    run1 = list_segments(history)
    missing = [p for p in run1 if not marker_path(p).exists()]
    assert len(missing) >= 2
    proxy.up()

    # Run 2: credentials, endpoint and region from the AWS_* variables alone; no new segment
    # closes while it runs. It uploads exactly the segments run 1 left without a marker.
    path2 = tmp_path / "run2.properties"
    path2.write_text(upload)
    env2 = {**bare, "AWS_ACCESS_KEY_ID": "AKIDFROMENV", "AWS_SECRET_ACCESS_KEY": SECRETS["env secret"],
            "AWS_SESSION_TOKEN": SECRETS["env token"], "AWS_ENDPOINT_URL_S3": proxy.url,
            "AWS_REGION": "eu-west-1"}
    proxy.access_keys.clear()
    proxy.tokens.clear()
    log2 = tmp_path / "run2.log"
    proc = launch([base, path2], log2, env2)
    try:
        wait_ready(port, proc)
        eventually(lambda: _assert(status(port)["history"]["pending_upload_segments"] == 0), timeout=30)
        metrics = scrape(port)
        seen.update({f"run 2 {k}": v for k, v in shown(port).items()})
    finally:
        stop(proc)
    assert proxy.access_keys == {b"AKIDFROMENV"} and proxy.tokens == {SECRETS["env token"].encode()}
    assert metrics[("mirrorlag_history_upload_bytes_total", ())] == sum(p.stat().st_size for p in missing)
    assert metrics[("mirrorlag_history_upload_failures_total", ())] == 0
    assert_whole(moto, bucket, run1, history)  # every segment of run 1 once; run 2's last is local only

    seen["run 1 log"], seen["run 2 log"] = log1.read_bytes(), log2.read_bytes()
    found = {where: names for where, blob in seen.items() if (names := leaks(blob))}
    assert found == {}
    assert b"uploading segments failed" in seen["run 1 log"] and b"Traceback" not in seen["run 1 log"]
    assert b"DEBUG" in seen["run 2 log"]


def test_bad_s3_keys_are_one_line_naming_file_line_and_key_without_the_secret(tmp_path):
    secret = SECRETS["config secret"]
    base = f"mirrorlag.history.dir = {tmp_path}/h\nmirrorlag.history.upload.uri = s3://b/h\n"
    cases = {
        "secret.access.key": base + f"mirrorlag.history.upload.s3.secret.access.key = {secret}\n",
        "endpoint.url": base + f"mirrorlag.history.upload.s3.endpoint.url = http://me:{secret}@minio:9000\n",
        "session.token": base.replace("s3://b/h", f"file://{tmp_path}/up")
        + f"mirrorlag.history.upload.s3.session.token = {secret}\n",
    }
    procs = {}
    for key, text in cases.items():
        path = tmp_path / f"{key}.properties"
        path.write_text(BASE + text)
        procs[key] = (path, subprocess.Popen([sys.executable, "-m", "mirrorlag", "check", "--config", str(path)],
                                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for key, (path, proc) in procs.items():
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 3 and out.startswith("MIRRORLAG UNKNOWN - ") and len(err.splitlines()) == 1, err
        assert f"{path}:7: mirrorlag.history.upload.s3.{key}: " in err and secret not in err + out, err
