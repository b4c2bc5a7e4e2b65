"""MirrorMaker 2 as Strimzi's operator runs it: a Kafka Connect worker in distributed mode on the
target, its connectors created over Connect's REST API, each configured from a KafkaMirrorMaker2
resource the way Strimzi's operator does it (KafkaMirrorMaker2Connectors.prepareMirrorMaker2ConnectorConfig
and KafkaConnectConfigurationBuilder, read at strimzi-kafka-operator 8541da1e, after 1.2.0), for
plain-text clusters: what mirrorlag is tested against when it reads the same resource (--strimzi)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from mirrorlag.apache_kafka.processes import JavaProcess
from mirrorlag.embedded import free_port
from mirrorlag.errors import MirrorlagError

BYTE_ARRAY = "org.apache.kafka.connect.converters.ByteArrayConverter"
CONNECTORS = {"MirrorSourceConnector": "sourceConnector", "MirrorCheckpointConnector": "checkpointConnector"}


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def worker_config(spec: dict, rest_port: int) -> dict[str, object]:
    """The Connect worker's properties Strimzi writes from `spec.target` (v1)."""
    target = spec["target"]
    return {
        "bootstrap.servers": target["bootstrapServers"],
        "security.protocol": "PLAINTEXT",
        "group.id": target["groupId"],
        "config.storage.topic": target["configStorageTopic"],
        "offset.storage.topic": target["offsetStorageTopic"],
        "status.storage.topic": target["statusStorageTopic"],
        # KafkaMirrorMaker2Configuration's defaults, under the resource's own config
        "key.converter": BYTE_ARRAY, "value.converter": BYTE_ARRAY, "header.converter": BYTE_ARRAY,
        **{k: _text(v) for k, v in target.get("config", {}).items()},
        "listeners": f"http://127.0.0.1:{rest_port}",
        "rest.advertised.host.name": "127.0.0.1",
        "rest.advertised.port": rest_port,
    }


def connectors(spec: dict) -> dict[str, dict[str, str]]:
    """Each mirror's connectors by name (`<source>-><target>.<Class>`), with their config."""
    target = spec["target"]
    out = {}
    for mirror in spec["mirrors"]:
        source = mirror["source"]
        for kind, field_name in CONNECTORS.items():
            connector = mirror.get(field_name)
            if connector is None:
                continue
            config: dict[str, Any] = {}
            for prefix, cluster in (("target.cluster.", target), ("source.cluster.", source)):
                config.update({prefix + "alias": cluster["alias"], prefix + "bootstrap.servers": cluster["bootstrapServers"],
                               prefix + "security.protocol": "PLAINTEXT"})
                config.update({prefix + k: v for k, v in cluster.get("config", {}).items()})
            config.update(connector.get("config", {}))
            for pattern, key in (("topicsPattern", "topics"), ("topicsExcludePattern", "topics.exclude"),
                                    ("groupsPattern", "groups"), ("groupsExcludePattern", "groups.exclude")):
                if pattern in mirror:
                    config[key] = mirror[pattern]
            # The KafkaConnector's class and tasksMax, as the operator sends them to Connect.
            config["connector.class"] = f"org.apache.kafka.connect.mirror.{kind}"
            config["tasks.max"] = connector.get("tasksMax", 1)
            out[f"{source['alias']}->{target['alias']}.{kind}"] = {k: _text(v) for k, v in config.items()}
    return out


@dataclass
class ConnectWorker(JavaProcess):
    """`connect-distributed.sh worker.properties`, driven over its REST API."""

    spec: dict = field(default_factory=dict)
    rest_port: int = field(default_factory=free_port)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.rest_port}"

    def start(self, timeout_s: float = 120.0) -> "ConnectWorker":
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self.directory / "worker.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in worker_config(self.spec, self.rest_port).items()))
        self._spawn(self._java("org.apache.kafka.connect.cli.ConnectDistributed", str(config)))
        self._wait(lambda: self._get("/connectors") is not None, timeout_s, "Connect's REST API did not answer")
        return self

    def apply(self, timeout_s: float = 120.0) -> None:
        """Create (or update) every connector of the resource and wait for its tasks to run."""
        wanted = connectors(self.spec)
        for name, config in wanted.items():
            self._request("PUT", f"/connectors/{urllib.request.quote(name, safe='')}/config", config)

        statuses: dict[str, Any] = {}

        def running() -> bool:
            # A checkpoint connector with no group to checkpoint yet runs no task: only the source
            # connector must have its tasks running.
            for name in wanted:
                statuses[name] = state = self._get(f"/connectors/{urllib.request.quote(name, safe='')}/status")
                if state and any(t["state"] == "FAILED" for t in state.get("tasks", [])):
                    raise MirrorlagError(f"{name} failed: {state}")
                if not state or state["connector"]["state"] != "RUNNING" \
                        or any(t["state"] != "RUNNING" for t in state["tasks"]) \
                        or (name.endswith(".MirrorSourceConnector") and not state["tasks"]):
                    return False
            return True
        self._wait(running, timeout_s, f"the connectors did not run ({statuses})")

    def _wait(self, ok, timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                raise MirrorlagError(f"the Connect worker exited: {self.log_tail()}")
            if ok():
                return
            time.sleep(0.5)
        raise MirrorlagError(f"{what} within {timeout_s:.0f} s: {self.log_tail()}")

    def _get(self, path: str) -> Any:
        try:
            return self._request("GET", path)
        except (urllib.error.URLError, OSError):
            return None

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"null")
