"""`mirrorlag check --url`: the verdict of a running sidecar, read from its `/status`, in well
under a second: no Kafka client, no window of its own. The sidecar judges every partition each
poll over its full KIP-16 window, so the answer is as good as its last poll, and says how old that is.
"""

from __future__ import annotations

import base64
import json
import ssl
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mirrorlag.check.output import Status, Thresholds, partitions_verdict, unknown_line
from mirrorlag.model import PartitionKey, PartitionRow, State


@dataclass(frozen=True)
class UrlCheck:
    url: str  # the sidecar's base URL (http://host:9464) or its /status
    timeout_s: float
    max_age_s: float  # an older verdict is UNKNOWN: the sidecar stopped polling
    user: str | None = None
    password_file: Path | None = None
    ca_file: Path | None = None  # the CA of the listener's certificate (web config tls_server_config)
    client_cert: Path | None = None  # for a listener that asks for client certificates (client_auth_type)
    client_key: Path | None = None


def run_url_check(check: UrlCheck, as_json: bool, thresholds: Thresholds, quiet: bool = False) -> int:
    try:
        doc = _fetch(check)
    except (OSError, ValueError) as exc:  # URLError, HTTPError, a timeout, TLS, bad JSON are all OSError/ValueError
        return _unknown(f"{_status_url(check.url)}: {_why(exc)}", as_json)
    # last_success_at: a sidecar before the fix of an empty snapshot's taken_at (null) says it there
    taken_at = doc.get("taken_at") or doc.get("last_success_at")
    if taken_at is None:
        return _unknown(f"{_status_url(check.url)}: the sidecar has not polled yet", as_json)
    age = max(0.0, time.time() - float(taken_at))
    if age > check.max_age_s:
        return _unknown(f"{_status_url(check.url)}: the sidecar's verdict is {age:.0f} s old "
                        f"(more than --max-age {check.max_age_s:g} s): is it still polling?", as_json)
    partitions = [p for p in doc.get("partitions", []) if p["state"] != State.GONE.value]
    verdict = partitions_verdict([_row(p) for p in partitions], thresholds,
                                 note=f"sidecar's verdict {age:.0f} s old")
    if as_json:
        json.dump(partitions, sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif not (quiet and verdict.status is Status.OK):
        print(verdict.line)
    return verdict.status


def _status_url(url: str) -> str:
    return url if url.rstrip("/").endswith("/status") else url.rstrip("/") + "/status"


def _fetch(check: UrlCheck) -> dict[str, Any]:
    request = urllib.request.Request(_status_url(check.url), headers={"Accept": "application/json"})
    if check.user is not None:
        password = "" if check.password_file is None else check.password_file.read_text().rstrip("\n")
        token = base64.b64encode(f"{check.user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    context = None
    if check.url.startswith("https:"):
        context = ssl.create_default_context(cafile=check.ca_file)
        if check.client_cert is not None:
            context.load_cert_chain(check.client_cert, check.client_key)
    with urllib.request.urlopen(request, timeout=check.timeout_s, context=context) as response:
        return json.loads(response.read())


def _why(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        return str(exc.reason)
    return str(exc) or type(exc).__name__


def _row(p: dict[str, Any]) -> PartitionRow:
    """A /status partition as the row the verdict reads (row_to_dict's inverse, for what it needs)."""
    return PartitionRow(PartitionKey(p["source"], p["target"], p["topic"], p["partition"]), State(p["state"]),
                        p["leo"], p["lro"], p["lro_feed"], p["lro_age_s"], p["record_lag"], p["record_lag_min"],
                        p["record_lag_max"], p["record_lag_avg"], p["time_lag_s"],
                        time_lag_lower_bound=p.get("time_lag_lower_bound", False))


def _unknown(reason: str, as_json: bool) -> int:
    if as_json:
        json.dump({"status": "UNKNOWN", "reason": reason, "clusters": []}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(unknown_line(reason))
    return Status.UNKNOWN
