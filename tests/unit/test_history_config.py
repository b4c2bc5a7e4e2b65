"""mirrorlag.history.* keys: defaults, parsing, and errors that name file:line:key."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from mirrorlag.config import load_settings
from mirrorlag.config.settings import HistorySettings
from mirrorlag.errors import ConfigError
from mirrorlag.history import History

BASE = """\
clusters = A, B
A.bootstrap.servers = a:9092
B.bootstrap.servers = b:9092
A->B.enabled = true
"""
NEXT = 5  # the first line after BASE


def load(tmp_path: Path, *texts: str):
    paths = []
    for i, text in enumerate(texts):
        path = tmp_path.resolve() / f"f{i}.properties"
        path.write_text(text)
        paths.append(path)
    return load_settings(paths)


def error(tmp_path: Path, *texts: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, *texts)
    return info.value


def at(err: ConfigError, tmp_path: Path, line: int, key: str, file: int = 0) -> str:
    path = tmp_path.resolve() / f"f{file}.properties"
    assert (err.file, err.line, err.key) == (path, line, key)
    assert str(err).startswith(f"{path}:{line}: {key}: ")
    return str(err)


def test_history_is_off_unless_a_dir_is_set(tmp_path: Path) -> None:
    assert load(tmp_path, BASE).history is None
    assert History.from_settings(None) is None


def test_defaults(tmp_path: Path) -> None:
    h = load(tmp_path, BASE + f"mirrorlag.history.dir = {tmp_path}/h\n").history
    assert h == HistorySettings(dir=tmp_path / "h", writer_id=f"{socket.gethostname()}:9464", refresh_interval_s=15.0)
    assert (h.segment_s, h.segment_max_rows, h.buffer_max_rows, h.retention_s) == (300.0, 1_000_000, 2_000_000, 604800.0)
    assert (h.upload_uri, h.upload_max_bytes_per_s, h.upload_quota_window_num, h.upload_quota_window_s) == (None, None, 11, 1.0)


def test_every_key(tmp_path: Path) -> None:
    h = load(tmp_path, BASE + (
        f"mirrorlag.history.dir = {tmp_path}/h\n"
        "mirrorlag.history.segment.ms = 60000\n"
        "mirrorlag.history.segment.max.rows = 5000\n"
        "mirrorlag.history.buffer.max.rows = 10000\n"
        "mirrorlag.history.retention.ms = -1\n"
        f"mirrorlag.history.upload.uri = file://{tmp_path}/remote\n"
        "mirrorlag.history.upload.max.bytes.per.second = 1048576\n"
        "mirrorlag.history.upload.quota.window.num = 5\n"
        "mirrorlag.history.upload.quota.window.size.seconds = 2\n"
        "mirrorlag.history.writer.id = mm2-east-1\n"
        "replication.record.lag.metric.refresh.interval = 120000\n"
    )).history
    assert h == HistorySettings(
        dir=tmp_path / "h", segment_s=60.0, segment_max_rows=5000, buffer_max_rows=10000, retention_s=None,
        upload_uri=f"file://{tmp_path}/remote", upload_max_bytes_per_s=1048576, upload_quota_window_num=5,
        upload_quota_window_s=2.0, writer_id="mm2-east-1", refresh_interval_s=120.0,
    )


def test_relative_dir_is_made_absolute_from_the_working_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    h = load(tmp_path, BASE + "mirrorlag.history.dir = data/history \n").history
    assert h.dir == Path(os.getcwd()) / "data" / "history"


def test_a_later_file_turns_history_off_with_a_blank_dir(tmp_path: Path) -> None:
    assert load(tmp_path, BASE + "mirrorlag.history.dir = /x\n", "mirrorlag.history.dir =\n").history is None


def test_long_max_is_no_quota(tmp_path: Path) -> None:
    h = load(tmp_path, BASE + "mirrorlag.history.dir = /x\n"
             "mirrorlag.history.upload.max.bytes.per.second = 9223372036854775807\n").history
    assert h.upload_max_bytes_per_s is None


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("mirrorlag.history.segment.ms", "0"),
        ("mirrorlag.history.segment.ms", "5m"),
        ("mirrorlag.history.segment.max.rows", "0"),
        ("mirrorlag.history.buffer.max.rows", "-5"),
        ("mirrorlag.history.retention.ms", "-2"),
        ("mirrorlag.history.retention.ms", "7d"),
        ("mirrorlag.history.upload.max.bytes.per.second", "0"),
        ("mirrorlag.history.upload.max.bytes.per.second", "9223372036854775808"),
        ("mirrorlag.history.upload.quota.window.num", "0"),
        ("mirrorlag.history.upload.quota.window.size.seconds", "0.5"),
    ],
)
def test_bad_values_name_file_line_and_key(tmp_path: Path, key: str, value: str) -> None:
    err = error(tmp_path, BASE + f"{key} = {value}\nmirrorlag.history.dir = /x\n")
    assert f"got {value!r}" in at(err, tmp_path, NEXT, key)


def test_a_misspelt_history_key_suggests_the_right_one(tmp_path: Path) -> None:
    err = error(tmp_path, BASE + "mirrorlag.history.segment.max.row = 10\n")
    assert at(err, tmp_path, NEXT, "mirrorlag.history.segment.max.row").endswith(
        "unknown key; did you mean mirrorlag.history.segment.max.rows?")


def test_upload_without_a_dir(tmp_path: Path) -> None:
    err = error(tmp_path, BASE + "mirrorlag.history.upload.uri = file:///tmp/x\n")
    assert "needs mirrorlag.history.dir" in at(err, tmp_path, NEXT, "mirrorlag.history.upload.uri")


def test_unknown_upload_protocol_is_not_echoed(tmp_path: Path) -> None:
    err = error(tmp_path, BASE + "mirrorlag.history.dir = /x\nmirrorlag.history.upload.uri = nope://user:secret@host/p\n")
    message = at(err, tmp_path, NEXT + 1, "mirrorlag.history.upload.uri")
    assert "unknown filesystem protocol 'nope'" in message and "secret" not in message


# s3fs is installed here (the `s3` extra): a fresh interpreter that cannot import it stands in for
# a sidecar installed without the extra (fsspec keeps the classes it already imported).
NO_S3FS = """
import sys
class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name == "s3fs" or name.startswith("s3fs."):
            raise ImportError("No module named 's3fs'")
sys.meta_path.insert(0, Blocker())
from mirrorlag.config import load_settings
from mirrorlag.errors import ConfigError
try:
    load_settings([sys.argv[1]])
except ConfigError as err:
    print(err)
"""


def test_upload_protocol_whose_backend_is_missing(tmp_path: Path) -> None:
    path = tmp_path.resolve() / "f0.properties"
    path.write_text(BASE + "mirrorlag.history.dir = /x\nmirrorlag.history.upload.uri = s3://bucket/history\n")
    done = subprocess.run([sys.executable, "-c", NO_S3FS, str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.startswith(f"{path}:{NEXT + 1}: mirrorlag.history.upload.uri: the s3:// filesystem is not "
                                  "installed (Install s3fs to access S3)"), done.stdout


def test_upload_inside_the_history_dir(tmp_path: Path) -> None:
    err = error(tmp_path, BASE + "mirrorlag.history.dir = /x/h\nmirrorlag.history.upload.uri = file:///x/h/up\n")
    assert "must not be inside" in at(err, tmp_path, NEXT + 1, "mirrorlag.history.upload.uri")
    assert load(tmp_path, BASE + "mirrorlag.history.dir = /x/h\nmirrorlag.history.upload.uri = /x/h2\n").history


def test_segment_larger_than_the_buffer(tmp_path: Path) -> None:
    err = error(tmp_path, BASE + "mirrorlag.history.dir = /x\nmirrorlag.history.buffer.max.rows = 10\n")
    assert "must not exceed" in at(err, tmp_path, NEXT + 1, "mirrorlag.history.buffer.max.rows")
