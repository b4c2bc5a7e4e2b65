"""`mirrorlag rollup ARGS` through its own entry, in this process, on the suite's SparkSession:
the command's parsing, output, one-line errors and exit statuses, without a JVM of its own
(~20 s to start each). The tests that need a process of its own (killed by a signal, say) start one."""

from __future__ import annotations

import subprocess
from contextlib import redirect_stderr, redirect_stdout
from io import StringIO

from mirrorlag.errors import exit_status
from mirrorlag.rollup.cli import build_parser, cmd_rollup


def rollup(spark, *argv: str) -> subprocess.CompletedProcess:
    out, err = StringIO(), StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            args = build_parser().parse_args(list(argv))
        except SystemExit as exc:  # argparse's usage error
            status = exc.code if isinstance(exc.code, int) else 2
        else:
            status = exit_status(lambda: cmd_rollup(args, session=spark))
    return subprocess.CompletedProcess(["mirrorlag", "rollup", *argv], status, out.getvalue(), err.getvalue())
