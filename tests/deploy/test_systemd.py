"""deploy/systemd/mirrorlag.service: `systemd-analyze verify` (systemd's own unit parser: unknown
keys, bad values and a missing ExecStart binary are findings) and `systemd-analyze security
--offline` (the hardening's exposure score), and its ExecStart parsed as `mirrorlag run`.

verify also checks that the ExecStart binary exists; /opt/mirrorlag/bin/mirrorlag (the install
path the unit documents) does not exist on a test machine, so the check runs on a copy whose
ExecStart names this venv's mirrorlag instead, nothing else changed."""

from __future__ import annotations

import shlex
import sys
from configparser import ConfigParser
from pathlib import Path

import pytest

from tests.deploy.common import CONFIG, DEPLOY, parse_run, properties, run_tool
from tests.tools import require_tool

UNIT = DEPLOY / "systemd" / "mirrorlag.service"
INSTALLED = "/opt/mirrorlag/bin/mirrorlag"


@pytest.fixture(scope="module")
def systemd_analyze() -> str:
    return require_tool("systemd-analyze", "systemd")


def unit() -> ConfigParser:
    parser = ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # systemd keys are case-sensitive
    parser.read_string(UNIT.read_text())
    return parser


def exec_start() -> list[str]:
    return shlex.split(unit()["Service"]["ExecStart"])


@pytest.fixture
def testable_unit(tmp_path) -> Path:
    copy = tmp_path / UNIT.name
    text = UNIT.read_text()
    assert text.count(f"ExecStart={INSTALLED} ") == 1
    copy.write_text(text.replace(f"ExecStart={INSTALLED} ", f"ExecStart={Path(sys.executable).parent / 'mirrorlag'} "))
    return copy


def test_systemd_analyze_verify_is_clean(systemd_analyze, testable_unit):
    out = run_tool([systemd_analyze, "verify", str(testable_unit)], timeout=30)
    assert not out.stderr.strip() and not out.stdout.strip(), out.stderr


def test_systemd_analyze_verify_catches_mistakes(systemd_analyze, testable_unit):
    testable_unit.write_text(testable_unit.read_text().replace("ProtectSystem=strict", "ProtectSytem=strict"))
    out = run_tool([systemd_analyze, "verify", str(testable_unit)], timeout=30)
    assert "Unknown key 'ProtectSytem'" in out.stderr


def test_hardening_exposure_is_low(systemd_analyze, testable_unit):
    """--threshold=20 fails above an exposure of 2.0 out of 10 (systemd rates <= 2.0 "OK")."""
    out = run_tool([systemd_analyze, "security", "--offline=yes", "--no-pager", "--threshold=20",
                    str(testable_unit)], timeout=30)
    assert "Overall exposure level" in out.stdout
    service = unit()["Service"]
    assert service["User"] != "root" and service["NoNewPrivileges"] == "yes" and service["ProtectSystem"] == "strict"


def test_exec_start_is_mirrorlag_run_with_the_example_configs():
    argv = exec_start()
    assert argv[0] == INSTALLED
    configs = parse_run(["run", *argv[2:]]) if argv[1] == "run" else pytest.fail(argv)
    assert Path(configs[0]).name == "mm2.properties"  # the file MirrorMaker 2 runs with
    assert configs[-1] == "/etc/mirrorlag/mirrorlag.properties" and (CONFIG / "mirrorlag.properties").is_file()


def test_state_directory_holds_the_history():
    service = unit()["Service"]
    history = properties(CONFIG / "mirrorlag.properties")["mirrorlag.history.dir"]
    assert Path("/var/lib") / service["StateDirectory"] == Path(history).parent
    assert service["RestartPreventExitStatus"] == "2"  # a configuration error (README: exit 2)
