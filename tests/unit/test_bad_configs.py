"""A corpus of broken properties files through the real CLI: `mirrorlag check` and `mirrorlag run`
each end with exactly one line on stderr naming file, line and key, and no traceback; `run` with exit
status 2, `check` with 3 (UNKNOWN, as Nagios reads it) and the message on its status line too.

Each file in tests/data/bad_configs/ says on its first line what the error must read:
`# expect: {file}:<line>: <key>: <fragment>`. The part before the last ": " must start the message
right after "mirrorlag: error: "; the fragment must appear in it. Every case runs through `check`,
a sample of each kind of error also through `run` (they share the loader; an interpreter start costs
most of a second here), all as concurrent subprocesses.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CORPUS = Path(__file__).parent.parent / "data" / "bad_configs"
GOOD = "clusters = a, b\na.bootstrap.servers = 127.0.0.1:1\nb.bootstrap.servers = 127.0.0.1:2\na->b.enabled = true\n"
# Secret values in the corpus and the extra cases: none may ever be printed.
SECRETS = ("pass\\u12", "s3cr3t-layered")
RUN_TOO = {"bad-number-lag-time-max", "undefined-alias", "duplicate-flow", "jks-truststore", "huge-refresh-interval",
           "directory"}


def _cases(tmp: Path) -> dict[str, tuple[list[Path], str]]:
    """name -> (config files, expectation with {file} standing for the file the error names)."""
    cases = {}
    for path in sorted(CORPUS.glob("*.properties")):
        first = path.read_text(encoding="latin-1").splitlines()[0]
        assert first.startswith("# expect: "), path
        cases[path.stem] = ([path], first.removeprefix("# expect: "))
    # Unreadable: a directory, a dangling symlink, and (when not root, who reads anything) mode 000.
    directory = tmp / "is-a-directory.properties"
    directory.mkdir()
    cases["directory"] = ([directory], "{file}: cannot read file: Is a directory")
    dangling = tmp / "dangling.properties"
    dangling.symlink_to(tmp / "nowhere.properties")
    cases["dangling-symlink"] = ([dangling], "{file}: cannot read file: No such file or directory")
    if os.geteuid() != 0:
        locked = tmp / "locked.properties"
        locked.write_text(GOOD)
        locked.chmod(0)
        cases["mode-000"] = ([locked], "{file}: cannot read file: Permission denied")
    garbage = tmp / "garbage.properties"
    garbage.write_bytes(bytes(range(256)) * 8)
    cases["binary-garbage"] = ([garbage], "clusters: required key is missing (read ")
    # Layered: the error points at the second file, which holds the value in force.
    base, override = tmp / "mm2.properties", tmp / "mirrorlag.properties"
    base.write_text(GOOD + "replication.lag.time.max.ms = 30000\n")
    override.write_text("# mirrorlag's own keys\na.sasl.jaas.config = s3cr3t-layered\n"
                        "a.security.protocol = SASL_SSL\na.sasl.mechanism = PLAIN\n")
    cases["layered-bad-jaas"] = ([base, override], "{file}:2: a.sasl.jaas.config: ")
    return cases


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], tuple[list[Path], str, subprocess.CompletedProcess]]:
    tmp = tmp_path_factory.mktemp("bad-configs")
    cases = _cases(tmp)
    running = {}
    for name, (files, expect) in cases.items():
        args = [a for f in files for a in ("--config", str(f))]
        for command in ("check", "run") if name in RUN_TOO else ("check",):
            extra = ["--timeout", "2"] if command == "check" else []
            running[(name, command)] = (files, expect, subprocess.Popen(
                [sys.executable, "-m", "mirrorlag", command, *args, *extra],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    done = {}
    for key, (files, expect, proc) in running.items():
        try:
            out, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        done[key] = (files, expect, subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return done


def _names() -> list[str]:
    extra = ["directory", "dangling-symlink", "binary-garbage", "layered-bad-jaas"]
    if os.geteuid() != 0:
        extra.append("mode-000")
    return sorted(p.stem for p in CORPUS.glob("*.properties")) + extra


def test_the_corpus_covers_the_issue_list():
    names = set(_names())
    for wanted in ("bad-number-lag-time-max", "negative-refresh-interval", "unknown-policy-class",
                   "undefined-alias", "directory", "invalid-regex", "duplicate-flow", "jks-truststore"):
        assert wanted in names


@pytest.mark.parametrize("name,command", [(n, c) for n in _names() for c in ("check", "run")
                                          if c == "check" or n in RUN_TOO])
def test_one_line_with_file_line_and_key_and_exit_2(results, name, command):
    files, expect, result = results[(name, command)]
    assert result.returncode == (3 if command == "check" else 2), (result.returncode, result.stderr)
    assert result.stdout == ("" if command == "run" else
                             f"MIRRORLAG UNKNOWN - {' '.join(result.stderr.removeprefix('mirrorlag: error: ').split())}\n")
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    line = lines[0]
    located, _, fragment = expect.rpartition(": ")
    named = files[-1]  # the file holding the value in force (the last one, in these cases)
    located, fragment = (s.replace("{file}", str(named.resolve())) for s in (located, fragment))
    assert line.startswith(f"mirrorlag: error: {located}: "), line
    assert fragment in line, line
    assert str(named.resolve()) in line
    for secret in SECRETS:
        assert secret not in line
