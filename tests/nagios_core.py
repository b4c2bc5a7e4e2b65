"""Nagios Core itself (Debian's nagios4-core) running plugins as service checks: the consumer an
operator's `check_command` feeds. One host, a service per plugin command line, checks forced
through the external command pipe, their results read back from status.dat as Nagios parsed them
(the state from the exit code, the status line, the perfdata after `|`, the long output)."""

from __future__ import annotations

import grp
import os
import pwd
import signal
import stat
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Mapping

from tests.helpers import eventually
from tests.tools import require_tool

_MAIN = """log_file={d}/nagios.log
cfg_file={d}/objects.cfg
object_cache_file={d}/objects.cache
precached_object_file={d}/objects.precache
status_file={d}/status.dat
status_update_interval=1
nagios_user={user}
nagios_group={group}
check_external_commands=1
command_file={d}/nagios.cmd
lock_file={d}/nagios.lock
temp_file={d}/nagios.tmp
temp_path={d}
check_result_path={d}/checkresults
retain_state_information=0
state_retention_file={d}/retention.dat
interval_length=60
enable_notifications=0
execute_host_checks=0
use_syslog=0
check_result_reaper_frequency=1
max_check_result_reaper_time=1
enable_flap_detection=0
"""

_OBJECTS = """define timeperiod {{
    timeperiod_name always
    alias always
{days}
}}
define contact {{
    contact_name nobody
    host_notifications_enabled 0
    service_notifications_enabled 0
    host_notification_period always
    service_notification_period always
    host_notification_options n
    service_notification_options n
    host_notification_commands noop
    service_notification_commands noop
}}
define command {{
    command_name noop
    command_line /bin/true
}}
define host {{
    host_name mm2
    max_check_attempts 1
    check_period always
    contacts nobody
    notification_period always
    active_checks_enabled 0
}}
"""

_SERVICE = """define command {{
    command_name {name}
    command_line {command}
}}
define service {{
    host_name mm2
    service_description {name}
    check_command {name}
    max_check_attempts 1
    check_interval 60
    retry_interval 60
    check_period always
    notification_period always
    contacts nobody
}}
"""

DAYS = ("sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday")


@contextmanager
def nagios_core(root: Path, services: Mapping[str, str]) -> Iterator[Path]:
    """Nagios Core running `services` (name -> command line) under `root`; yields its status.dat."""
    binary = require_tool("nagios4", "nagios4-core")
    root.mkdir(parents=True, exist_ok=True)
    (root / "checkresults").mkdir(exist_ok=True)
    d = str(root)
    (root / "nagios.cfg").write_text(_MAIN.format(d=d, user=pwd.getpwuid(os.getuid()).pw_name,
                                                  group=grp.getgrgid(os.getgid()).gr_name))
    days = "\n".join(f"    {day} 00:00-24:00" for day in DAYS)
    (root / "objects.cfg").write_text(_OBJECTS.format(days=days) + "".join(
        _SERVICE.format(name=name, command=command) for name, command in services.items()))
    verify = subprocess.run([binary, "-v", str(root / "nagios.cfg")], capture_output=True, text=True, timeout=60)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    with open(root / "nagios.out", "wb") as out:
        proc = subprocess.Popen([binary, str(root / "nagios.cfg")], stdout=out, stderr=out, start_new_session=True)
    try:
        pipe = root / "nagios.cmd"
        eventually(lambda: pipe.exists() and stat.S_ISFIFO(pipe.stat().st_mode), timeout=30)
        now = int(time.time())
        with open(pipe, "w") as commands:  # Nagios' external command pipe, as an operator's UI writes it
            for name in services:
                commands.write(f"[{now}] SCHEDULE_FORCED_SVC_CHECK;mm2;{name};{now}\n")
        yield root / "status.dat"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def service_status(status_dat: Path) -> dict[str, dict[str, str]]:
    """status.dat's servicestatus blocks by service, for the services Nagios has checked."""
    services: dict[str, dict[str, str]] = {}
    block: dict[str, str] | None = None
    for line in status_dat.read_text(errors="replace").splitlines():
        line = line.strip()
        if line == "servicestatus {":
            block = {}
        elif line == "}" and block is not None:
            if block.get("has_been_checked") == "1":
                services[block["service_description"]] = block
            block = None
        elif block is not None and "=" in line:
            key, _, value = line.partition("=")
            block[key] = value
    return services
