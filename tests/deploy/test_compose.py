"""deploy/docker-compose.yml: valid against the compose-spec JSON schema (vendored from
compose-spec/compose-spec, see schemas/README.md; no Docker engine here), and wired together: every
bind mount and build file exists, the brokers MM2 and mirrorlag read are services of the file,
Prometheus scrapes the mirrorlag service on its configured port and Grafana finds Prometheus and the
dashboard. The example config/*.properties load as `mirrorlag run` loads them."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import urlparse

import jsonschema
import pytest

from mirrorlag.cli import build_parser
from mirrorlag.config import load_settings
from tests.deploy.common import CONFIG, DASHBOARD, DEPLOY, ROLLUP_ENTRY, SCHEMAS, dockerfile_instructions, exec_form, \
    last, parse_run, rollup_image_zip, yaml_docs

COMPOSE = DEPLOY / "docker-compose.yml"


def compose() -> dict:
    return yaml_docs(COMPOSE)[0]


def services() -> dict[str, dict]:
    return compose()["services"]


def binds(service: dict) -> dict[str, Path]:
    """container path -> host path of the service's bind mounts (short syntax, relative to deploy/)."""
    out = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith("."):
            out[target] = (COMPOSE.parent / source).resolve()
    return out


def test_compose_file_validates_against_the_compose_spec_schema():
    schema = json.loads((SCHEMAS / "compose-spec.json").read_text())
    validator = jsonschema.Draft7Validator(schema)
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(compose())]
    assert not errors, errors
    bad = compose()
    bad["services"]["mirrorlag"]["read-only"] = True  # a misspelt key
    assert list(validator.iter_errors(bad))


def test_the_services_the_issue_asks_for():
    assert {"kafka-source", "kafka-target", "mm2", "mirrorlag", "prometheus", "grafana"} <= services().keys()
    mm2 = services()["mm2"]
    assert mm2["image"].startswith("apache/kafka:")
    assert mm2["command"][0] == "/opt/kafka/bin/connect-mirror-maker.sh"
    assert binds(mm2)[mm2["command"][1]] == CONFIG / "mm2.properties"


def test_every_bind_mount_and_build_file_exists():
    for name, service in services().items():
        for target, host in binds(service).items():
            assert host.exists(), f"{name}: {host} (mounted at {target}) is missing"
        if "build" in service:
            context = (COMPOSE.parent / service["build"]["context"]).resolve()
            assert (context / service["build"]["dockerfile"]).is_file(), name


def test_mirrorlag_service_runs_the_image_on_the_example_configs():
    service = services()["mirrorlag"]
    assert service["read_only"] is True and "/tmp" in service["tmpfs"]
    dockerfile = (COMPOSE.parent / service["build"]["context"] / service["build"]["dockerfile"]).resolve()
    ins = dockerfile_instructions(dockerfile)
    mounts = binds(service)
    local = [mounts[str(Path(c).parent)] / Path(c).name for c in parse_run(["run", *exec_form(last(ins, "CMD"))])]
    assert all(":ro" in v for v in service["volumes"] if v.startswith("../config"))
    settings = load_settings(local)
    volume_targets = {v.split(":")[1] for v in service["volumes"] if not v.startswith(".")}
    assert str(settings.history.dir) in volume_targets  # history on a named volume
    assert f"{settings.http_port}:{settings.http_port}" in service["ports"]
    # the brokers both MM2 and mirrorlag read are this file's services, as they advertise themselves
    for alias, cluster in settings.clusters.items():
        host, port = cluster.client["bootstrap.servers"].split(":")
        broker = services()[host]
        assert broker["environment"]["KAFKA_ADVERTISED_LISTENERS"] == f"PLAINTEXT://{host}:{port}", alias


def test_prometheus_scrapes_mirrorlag_and_grafana_reads_prometheus():
    prometheus = services()["prometheus"]
    config_path = binds(prometheus)["/etc/prometheus"] / "prometheus.yml"
    assert f"--config.file=/etc/prometheus/{config_path.name}" in prometheus["command"]
    scrape = {job["job_name"]: job for job in yaml_docs(config_path)[0]["scrape_configs"]}
    settings = load_settings([CONFIG / "mm2.properties", CONFIG / "mirrorlag.properties"])
    assert scrape["mirrorlag"]["static_configs"][0]["targets"] == [f"mirrorlag:{settings.http_port}"]

    grafana = services()["grafana"]
    mounts = binds(grafana)
    datasources = yaml_docs(mounts["/etc/grafana/provisioning"] / "datasources" / "prometheus.yml")[0]["datasources"]
    url = urlparse(datasources[0]["url"])
    assert url.hostname in services() and "9090:9090" in services()[url.hostname]["ports"]
    providers = yaml_docs(mounts["/etc/grafana/provisioning"] / "dashboards" / "mirrorlag.yml")[0]["providers"]
    dashboards_dir = mounts[providers[0]["options"]["path"]]
    assert DASHBOARD in dashboards_dir.glob("*.json")
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert mounts[str(Path(home).parent)] / Path(home).name == DASHBOARD
    # the dashboard's datasource variable defaults to the provisioned datasource
    variable = next(v for v in json.loads(DASHBOARD.read_text())["templating"]["list"] if v["type"] == "datasource")
    assert variable["current"]["value"] == datasources[0]["uid"]


@pytest.mark.parametrize("files", [["mm2.properties"], ["mm2.properties", "mirrorlag.properties"]])
def test_example_configs_load(files):
    settings = load_settings([CONFIG / f for f in files])
    assert [(f.source, f.target) for f in settings.flows] == [("source", "target")]


def test_the_rollup_profile_is_a_standalone_cluster_the_rollup_ships_mirrorlag_to():
    """`--profile rollup`: a master, two 1-core workers and spark-submit, all of the rollup image;
    the executors get mirrorlag from the image's zip on --py-files, and every Spark container sees
    the history and the output at the driver's paths, from the same volumes: the executors read
    the history only, the driver also leaves its receipts there (which the sidecar's expiry waits
    for)."""
    spark = {name: s for name, s in services().items() if "rollup" in s.get("profiles", [])}
    assert set(spark) == {"spark-master", "spark-worker-1", "spark-worker-2", "rollup"}
    assert all(s.get("profiles") is None for name, s in services().items() if name not in spark)  # `up` alone: no Spark
    built = {s["image"] for s in spark.values()}
    assert built == {services()["spark-master"]["image"]}
    assert services()["spark-master"]["build"]["dockerfile"] == "deploy/Dockerfile.rollup"

    master = services()["spark-master"]
    assert master["entrypoint"][-1] == "org.apache.spark.deploy.master.Master"
    args = master["command"]
    url = f"spark://{args[args.index('--host') + 1]}:{args[args.index('--port') + 1]}"
    assert master["hostname"] == args[args.index("--host") + 1]
    for name in ("spark-worker-1", "spark-worker-2"):
        worker = spark[name]
        assert worker["entrypoint"][-1] == "org.apache.spark.deploy.worker.Worker"
        assert worker["command"][-1] == url and worker["command"][worker["command"].index("--cores") + 1] == "1"

    argv = spark["rollup"]["command"]  # the image's entrypoint is spark-submit
    assert argv[argv.index("--master") + 1] == url
    assert argv[argv.index("--py-files") + 1] == rollup_image_zip()
    assert argv[argv.index("--total-executor-cores") + 1] == "2"
    script = argv.index(ROLLUP_ENTRY)
    args = build_parser().parse_args(["rollup", *argv[script + 1:]])
    volumes = {v.split(":")[1]: v for v in spark["rollup"]["volumes"]}
    assert not volumes[args.history].endswith(":ro") and not volumes[args.out].endswith(":ro")
    assert args.date is None and args.date_from is None  # the lookback: late and missed days caught up
    history_volume = next(v.split(":")[0] for v in services()["mirrorlag"]["volumes"] if v.endswith("/history"))
    assert volumes[args.history].split(":")[0] == history_volume  # the sidecar's
    for name in ("spark-worker-1", "spark-worker-2"):
        worker = {v.split(":")[1]: v for v in spark[name]["volumes"]}
        assert worker[args.history] == volumes[args.history] + ":ro" and worker[args.out] == volumes[args.out]
        assert worker.keys() == volumes.keys()
    assert {v.split(":")[0] for v in volumes.values()} <= compose()["volumes"].keys()
