"""Spark Connect URLs, SPARK_REMOTE, and the zip that ships mirrorlag to executors (no Spark here:
tests/integration/test_rollup_connect.py and test_rollup_cluster.py run them for real)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from argparse import Namespace

import pytest

from mirrorlag.rollup import job
from mirrorlag.rollup.cli import absolute, remote_from_args
from mirrorlag.rollup.errors import RollupError
from mirrorlag.rollup.remote import RemoteUrl, masked, parse
from mirrorlag.rollup.ship import package_root, package_zip


@pytest.mark.parametrize("url, expected", [
    ("sc://spark.example:15002", RemoteUrl("sc://spark.example:15002", "spark.example", 15002)),
    ("sc://spark.example", RemoteUrl("sc://spark.example", "spark.example", 15002)),
    ("sc://10.0.0.1:443/;use_ssl=true;token=abc", RemoteUrl("sc://10.0.0.1:443/;use_ssl=true;token=abc", "10.0.0.1", 443)),
    ("sc://[::1]:15002", RemoteUrl("sc://[::1]:15002", "::1", 15002)),
])
def test_connect_urls(url, expected):
    assert parse(url) == expected


@pytest.mark.parametrize("url", ["http://h:1", "sc://", "sc://h:0", "sc://h:70000", "h:15002", "sc://h:p"])
def test_bad_connect_urls_say_the_form(url):
    with pytest.raises(RollupError, match=r"^--remote: "):
        parse(url)


def test_a_token_is_never_echoed():
    assert masked("sc://h:1/;user_id=a;token=s3cr3t;use_ssl=true") == "sc://h:1/;user_id=a;token=****;use_ssl=true"
    with pytest.raises(RollupError) as err:
        parse("sc:/h/;token=s3cr3t")
    assert "s3cr3t" not in str(err.value)


def test_spark_remote_is_read_like_remote():
    args = Namespace(remote=None, master=None)
    assert remote_from_args(args, {}) is None
    assert remote_from_args(args, {"SPARK_REMOTE": "sc://h:1"}) == "sc://h:1"
    assert remote_from_args(Namespace(remote="sc://a:2", master=None), {"SPARK_REMOTE": "sc://h:1"}) == "sc://a:2"
    with pytest.raises(RollupError, match="exclude each other"):
        remote_from_args(Namespace(remote=None, master="local[2]"), {"SPARK_REMOTE": "sc://h:1"})
    with pytest.raises(RollupError, match="^--remote: "):
        remote_from_args(args, {"SPARK_REMOTE": "local"})


def test_the_shipped_zip_is_the_package_and_imports_alone(tmp_path):
    path = package_zip(tmp_path / "mirrorlag.zip")
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
    expected = sorted(f"mirrorlag/{p.relative_to(package_root()).as_posix()}" for p in package_root().rglob("*")
                      if "__pycache__" not in p.parts and p.suffix in (".py", ".json"))
    assert sorted(names) == expected and "mirrorlag/rollup/partials.py" in names
    assert "mirrorlag/rollup/trend_figures.json" in names  # the report's words are built from it
    assert package_zip(tmp_path / "again.zip").read_bytes() == path.read_bytes()  # reproducible
    # Imported from the zip alone (this venv's editable install switched off with -S, its
    # dependencies still on the path).
    deps = [p for p in sys.path if p.endswith("site-packages")]
    code = ("import sys; sys.path[:0] = [sys.argv[1]]; sys.path += sys.argv[2:]; "
            "import mirrorlag.rollup.partials as m; from mirrorlag.rollup import trend_figures as f; "
            "assert f.figures()['rows']; print(m.__file__)")
    proc = subprocess.run([sys.executable, "-S", "-c", code, str(path), *deps], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"{path}/mirrorlag/rollup/partials.py"


def test_a_python_workers_error_is_its_last_line():
    text = ("An exception was thrown from the Python worker. Please see the stack trace below.\n"
            "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
            "pyarrow.lib.ArrowInvalid: not Parquet\n\nJVM stacktrace:\norg.apache.spark.api.python.PythonException: ...\n")
    assert job._first_line(Exception(text)) == "in a Python worker: pyarrow.lib.ArrowInvalid: not Parquet"
    assert job._first_line(Exception("[PATH_NOT_FOUND] Path does not exist: s3a://b/x.\nJVM stacktrace: ...")) \
        == "[PATH_NOT_FOUND] Path does not exist: s3a://b/x."


def test_plain_paths_are_made_absolute_here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert absolute("history") == str(tmp_path / "history")
    for url in ("/abs/history", "s3a://b/h", "hdfs:///h", "file:///h"):
        assert absolute(url) == url
