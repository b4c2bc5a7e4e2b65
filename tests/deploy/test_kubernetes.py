"""deploy/kubernetes: every manifest validates offline against the Kubernetes OpenAPI schemas
(kubernetes-validate, strict: unknown fields are errors) for the oldest and newest versions it
targets; the Strimzi KafkaMirrorMaker2 against the openAPIV3Schema of Strimzi's own CRD (vendored,
see schemas/README.md) with the API server's pruning made an error. Then what the schemas cannot
see: non-root and read-only root filesystems, probes, config mounts that `mirrorlag run` loads,
MM2 and mirrorlag in separate pods (a mirrorlag upgrade rolls no MM2 pod) with the update
strategies and history access mode deploy/README.md states, mirrorlag reading the very
KafkaMirrorMaker2 Strimzi applies (kustomize, with kubectl when installed), and the rollup
CronJob's spark-submit command line run for real."""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

import mirrorlag
from mirrorlag.config.loader import GLOBAL_KEYS
from tests.deploy.common import DEPLOY, ROLLUP_ENTRY, kubernetes_docs, load_config_texts, parse_run, \
    rollup_image_zip, run_args, run_tool, strimzi_validator, yaml_docs

KUBERNETES_VERSIONS = ("1.31.0", "1.37.0")  # podFailurePolicy is GA from 1.31
STRIMZI_KIND = ("kafka.strimzi.io/v1", "KafkaMirrorMaker2")
DOCS = list(kubernetes_docs())


def _id(item: tuple[Path, dict]) -> str:
    path, doc = item
    return f"{path.relative_to(DEPLOY)}:{doc['kind']}/{doc['metadata']['name']}"


def pod_specs() -> list[tuple[str, dict]]:
    out = []
    for path, doc in DOCS:
        spec = doc.get("spec", {})
        if doc["kind"] == "CronJob":
            spec = spec["jobTemplate"]["spec"]
        if "template" in spec:
            out.append((_id((path, doc)), spec["template"]["spec"]))
    return out


def by_kind(kind: str, path: Path | None = None) -> dict[str, dict]:
    return {doc["metadata"]["name"]: doc for p, doc in DOCS if doc["kind"] == kind and path in (None, p)}


@pytest.mark.parametrize("item", [d for d in DOCS if (d[1]["apiVersion"], d[1]["kind"]) != STRIMZI_KIND], ids=_id)
@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_manifest_validates_against_the_kubernetes_schema(item, version):
    kubernetes_validate.validate(item[1], version, strict=True)


def test_kubernetes_validate_rejects_an_unknown_field():
    path, deployment = next(d for d in DOCS if d[1]["kind"] == "Deployment")
    bad = copy.deepcopy(deployment)
    bad["spec"]["template"]["spec"]["containers"][0]["livenessprobe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, KUBERNETES_VERSIONS[-1], strict=True)


def strimzi_resources() -> list[dict]:
    found = [doc for _, doc in DOCS if (doc["apiVersion"], doc["kind"]) == STRIMZI_KIND]
    assert len(found) == 1
    return found


def test_strimzi_kafkamirrormaker2_validates_against_strimzis_crd_schema():
    validator = strimzi_validator()
    for resource in strimzi_resources():
        errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(resource)]
        assert not errors, errors


def test_the_strimzi_schema_catches_mistakes():
    validator = strimzi_validator()
    resource = strimzi_resources()[0]
    for mutate in (
        lambda r: r["spec"]["target"].pop("offsetStorageTopic"),             # required
        lambda r: r["spec"]["mirrors"][0].update(topicPattern="x"),          # misspelt: would be pruned
        lambda r: r["spec"]["mirrors"][0]["sourceConnector"].update(tasksMax=0),  # minimum 1
        lambda r: r["spec"].update(mirrors="source"),                        # wrong type
    ):
        bad = copy.deepcopy(resource)
        mutate(bad)
        assert list(validator.iter_errors(bad)), mutate


@pytest.mark.parametrize("name,pod", pod_specs(), ids=[n for n, _ in pod_specs()])
def test_every_pod_runs_non_root_on_a_read_only_root_filesystem(name, pod):
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["automountServiceAccountToken"] is False
    for container in pod["containers"]:
        ctx = container["securityContext"]
        assert ctx["runAsNonRoot"] is True and ctx["runAsUser"] != 0, container["name"]
        assert ctx["readOnlyRootFilesystem"] is True, container["name"]
        assert ctx["allowPrivilegeEscalation"] is False and ctx["capabilities"]["drop"] == ["ALL"]
        assert "memory" in container["resources"]["limits"] and container["resources"]["requests"]
        mounts = {m["mountPath"] for m in container["volumeMounts"]}
        assert "/tmp" in mounts, f"{container['name']}: no writable /tmp on a read-only root"


def mirrorlag_containers() -> list[tuple[Path, dict, dict]]:
    out = []
    for path, doc in DOCS:
        if doc["kind"] == "Deployment":
            pod = doc["spec"]["template"]["spec"]
            out += [(path, pod, c) for c in pod["containers"] if c["image"].startswith("mirrorlag:")]
    return out


@pytest.mark.parametrize("path,pod,container", mirrorlag_containers(), ids=lambda v: getattr(v, "name", None))
def test_mirrorlag_container_probes_resources_and_config(tmp_path, path, pod, container):
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    port = {p["name"]: p["containerPort"] for p in container["ports"]}["metrics"]
    assert container["livenessProbe"]["httpGet"]["port"] == "metrics"
    # the memory request and limit: test_sizing.py
    assert "cpu" not in container["resources"]["limits"]  # a throttled poll would outlast the interval

    # args as the image's ENTRYPOINT (`mirrorlag run`) receives them; every file comes from a
    # ConfigMap mounted read-only, and together they load as `mirrorlag run` loads them
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    config_maps = {name: doc["data"] for name, doc in by_kind("ConfigMap", path).items()}
    config_maps.update(generated_config_maps(path.parent))

    def mounted(file: str) -> str:
        mount = mounts[str(Path(file).parent)]
        assert mount.get("readOnly") is True
        return config_maps[volumes[mount["name"]]["configMap"]["name"]][Path(file).name]

    args = run_args(["run", *container["args"]])
    texts = {config: mounted(config) for config in args.config or []}
    settings = load_config_texts(tmp_path, texts, mounted(args.strimzi) if args.strimzi else None)
    assert settings.http_port == port
    history = mounts[str(settings.history.dir)]
    assert not history.get("readOnly") and "persistentVolumeClaim" in volumes[history["name"]]
    claim = volumes[history["name"]]["persistentVolumeClaim"]["claimName"]
    assert claim in by_kind("PersistentVolumeClaim", path)
    services = [s for s in by_kind("Service", path).values()
                if s["spec"]["selector"].items() <= pod_labels(path, pod).items()]
    assert any(p["targetPort"] == "metrics" for s in services for p in s["spec"]["ports"])


def deployment_of(path: Path, pod: dict) -> dict:
    for p, doc in DOCS:
        if p == path and doc["kind"] == "Deployment" and doc["spec"]["template"]["spec"] is pod:
            return doc
    raise AssertionError("no Deployment")


def pod_labels(path: Path, pod: dict) -> dict:
    return deployment_of(path, pod)["spec"]["template"]["metadata"]["labels"]


MM2_BESIDE = DEPLOY / "kubernetes" / "mm2-with-mirrorlag.yaml"


def is_mirrorlag(container: dict) -> bool:
    return container["image"].startswith("mirrorlag:")


def is_mm2(container: dict) -> bool:
    return any("connect-mirror-maker" in a for a in container.get("command", []) + container.get("args", []))


def test_mm2_and_mirrorlag_never_share_a_pod():
    """A pod-template change (an image bump) replaces the whole pod: mirrorlag in MM2's pod could
    not be upgraded without stopping MM2. So no pod template holds both."""
    pods = pod_specs()
    assert any(is_mm2(c) for _, pod in pods for c in pod["containers"])
    for name, pod in pods:
        containers = pod["containers"] + pod.get("initContainers", [])
        assert not (any(map(is_mm2, containers)) and any(map(is_mirrorlag, containers))), name


def test_a_mirrorlag_upgrade_leaves_mm2s_deployment_as_it_is():
    """Bump every mirrorlag image in the file: the only objects that change are mirrorlag's
    Deployments, so `kubectl apply` rolls no MM2 pod."""
    before = yaml_docs(MM2_BESIDE)
    after = copy.deepcopy(before)
    for doc in after:
        if doc["kind"] == "Deployment":
            for c in doc["spec"]["template"]["spec"]["containers"]:
                if is_mirrorlag(c):
                    c["image"] = "registry.example/mirrorlag:9.9.9"
    changed = [(b["kind"], b["metadata"]["name"]) for b, a in zip(before, after) if a != b]
    assert changed == [("Deployment", "mirrorlag")]
    mm2 = [("Deployment", d["metadata"]["name"]) for d in before
           if d["kind"] == "Deployment" and any(map(is_mm2, d["spec"]["template"]["spec"]["containers"]))]
    assert mm2 and not set(mm2) & set(changed)


def test_mirrorlag_reads_the_configmap_mm2_reads():
    deployments = by_kind("Deployment", MM2_BESIDE)
    mm2_pod = deployments["mirrormaker2"]["spec"]["template"]["spec"]
    ml_pod = deployments["mirrorlag"]["spec"]["template"]["spec"]
    (mm2,) = mm2_pod["containers"]
    (ml,) = ml_pod["containers"]
    assert mm2["image"].startswith("apache/kafka:")
    assert mm2["command"] == ["/opt/kafka/bin/connect-mirror-maker.sh", "/etc/mm2/mm2.properties"]
    assert "/etc/mm2/mm2.properties" in parse_run(["run", *ml["args"]])

    def config_map(pod: dict, container: dict) -> str:
        volume = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}["/etc/mm2"]
        return {v["name"]: v for v in pod["volumes"]}[volume]["configMap"]["name"]

    assert config_map(mm2_pod, mm2) == config_map(ml_pod, ml) in by_kind("ConfigMap", MM2_BESIDE)


def readme_section(heading: str) -> str:
    text = (DEPLOY / "README.md").read_text()
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return " ".join(text[start:end].split())


def test_the_strategies_and_the_access_mode_are_what_deploy_readme_says():
    section = readme_section("Kubernetes: a Deployment beside MM2")
    said = {name: (kind, surge, unavailable) for name, kind, surge, unavailable in re.findall(
        r"- `([\w-]+)` \(`strategy: (\w+)`(?:, `maxSurge: (\d+)`, `maxUnavailable: (\d+)`)?\)", section)}
    deployments = by_kind("Deployment", MM2_BESIDE)
    assert set(said) == set(deployments) == {"mirrormaker2", "mirrorlag"}
    for name, (kind, surge, unavailable) in said.items():
        strategy = deployments[name]["spec"]["strategy"]
        assert strategy["type"] == kind, name
        if kind == "RollingUpdate":
            assert (str(strategy["rollingUpdate"]["maxSurge"]), str(strategy["rollingUpdate"]["maxUnavailable"])) \
                == (surge, unavailable), name
    # mirrorlag rolls without a gap: the old pod goes only once the new one is Ready; MM2 never runs
    # twice on one mm2.properties during its own rollout.
    assert said["mirrorlag"] == ("RollingUpdate", "1", "0") and said["mirrormaker2"][0] == "Recreate"
    claims = by_kind("PersistentVolumeClaim", MM2_BESIDE)
    modes = {claim: mode for mode, claim in re.findall(r"the `(ReadWrite\w+)` PVC `([\w-]+)`", section)}
    assert set(modes) == set(claims)
    for claim, mode in modes.items():
        assert claims[claim]["spec"]["accessModes"] == [mode], claim


def claim_names(pod: dict) -> set[str]:
    return {v["persistentVolumeClaim"]["claimName"] for v in pod.get("volumes", []) if "persistentVolumeClaim" in v}


def test_a_claim_two_pods_mount_at_once_is_read_write_many():
    """A ReadWriteOnce volume attaches to one node: a claim that a rolling update's surge pod, or
    the rollup CronJob beside the writer, mounts at the same time as another pod must be
    ReadWriteMany, or the second pod waits for it (and a rollout with it)."""
    (cronjob,) = by_kind("CronJob").values()
    rollup_claims = claim_names(cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"])
    for path, doc in DOCS:
        if doc["kind"] != "Deployment":
            continue
        rolling = doc["spec"].get("strategy", {}).get("type", "RollingUpdate") == "RollingUpdate"
        for claim in claim_names(doc["spec"]["template"]["spec"]):
            if rolling or claim in rollup_claims:
                pvc = by_kind("PersistentVolumeClaim", path)[claim]
                assert pvc["spec"]["accessModes"] == ["ReadWriteMany"], (_id((path, doc)), claim)


def test_a_rolling_mirrorlag_leaves_the_writer_id_to_the_pod():
    """During a rolling update two mirrorlag pods write the history; the rollup tells them apart by
    writer id, which defaults to the pod's name and port (docs/history-and-rollup.md "Several
    writers"). A fixed id would make them one writer."""
    rolling = 0
    for path, pod, container in mirrorlag_containers():
        if deployment_of(path, pod)["spec"].get("strategy", {}).get("type", "RollingUpdate") != "RollingUpdate":
            continue
        rolling += 1
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"  # the old pod stays until then
        for config_map in by_kind("ConfigMap", path).values():
            for text in config_map["data"].values():
                assert not re.search(r"^\s*mirrorlag\.history\.writer\.id\s*[=:]", text, flags=re.M)
    assert rolling


def test_the_prometheus_target_is_the_mirrorlag_service():
    """deploy/prometheus/prometheus.yml's job `mirrorlag` scrapes host `mirrorlag`, port 9464: on
    Kubernetes the Service of that name, whose selector picks mirrorlag's pods and not MM2's."""
    (config,) = yaml_docs(DEPLOY / "prometheus" / "prometheus.yml")
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "mirrorlag"]
    ((host, port),) = [t.split(":") for s in job["static_configs"] for t in s["targets"]]
    for path in {p for p, _, _ in mirrorlag_containers()}:
        service = by_kind("Service", path)[host]
        assert [p["port"] for p in service["spec"]["ports"] if p["name"] == "metrics"] == [int(port)]
        for _, doc in ((p, d) for p, d in DOCS if p == path and d["kind"] == "Deployment"):
            labels = doc["spec"]["template"]["metadata"]["labels"]
            selected = service["spec"]["selector"].items() <= labels.items()
            assert selected == any(map(is_mirrorlag, doc["spec"]["template"]["spec"]["containers"])), \
                doc["metadata"]["name"]


def kustomization(directory: Path) -> dict:
    path = directory / "kustomization.yaml"
    return yaml_docs(path)[0] if path.exists() else {}


def generated_config_maps(directory: Path) -> dict[str, dict[str, str]]:
    """The ConfigMaps kustomize makes from files (configMapGenerator), by name: file name -> text."""
    return {gen["name"]: {name: (directory / name).read_text() for name in gen["files"]}
            for gen in kustomization(directory).get("configMapGenerator", [])}


STRIMZI_DIR = DEPLOY / "kubernetes" / "strimzi"


def test_strimzi_mirrorlag_reads_the_resource_the_operator_applies(tmp_path):
    """No twin: kustomize applies kafkamirrormaker2.yaml and makes mirrorlag's ConfigMap of the same
    file; what `mirrorlag run --strimzi` derives from it is what the operator configures."""
    kustomize = kustomization(STRIMZI_DIR)
    assert kustomize["resources"] == ["kafkamirrormaker2.yaml", "mirrorlag.yaml"]
    assert generated_config_maps(STRIMZI_DIR) == {
        "mirrorlag-kafkamirrormaker2": {"kafkamirrormaker2.yaml": (STRIMZI_DIR / "kafkamirrormaker2.yaml").read_text()}}
    (resource,) = strimzi_resources()
    spec = resource["spec"]
    (deployment,) = by_kind("Deployment", STRIMZI_DIR / "mirrorlag.yaml").values()
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    args = run_args(["run", *container["args"]])
    assert Path(args.strimzi).name == "kafkamirrormaker2.yaml" and args.strimzi_secrets is None
    # the twin is gone: no ConfigMap restates the resource in MM2's keys
    assert all(set(cm["data"]) == {"mirrorlag.properties"} for cm in by_kind("ConfigMap", STRIMZI_DIR / "mirrorlag.yaml").values())
    settings = load_config_texts(tmp_path, {}, (STRIMZI_DIR / "kafkamirrormaker2.yaml").read_text())
    target = spec["target"]
    assert settings.clusters[target["alias"]].client["bootstrap.servers"] == target["bootstrapServers"]
    flows = {(f.source, f.target): f for f in settings.flows}
    assert len(flows) == len(spec["mirrors"])
    for mirror in spec["mirrors"]:
        source = mirror["source"]
        assert settings.clusters[source["alias"]].client["bootstrap.servers"] == source["bootstrapServers"]
        flow = flows[(source["alias"], target["alias"])]
        assert flow.topics_include.pattern == f"(?:{mirror['topicsPattern']})"
        connector = mirror["sourceConnector"].get("config", {})
        assert flow.offset_syncs_topic_location == connector.get("offset-syncs.topic.location", "source")
        # Connect-mode MM2 commits "<source>-><target>.MirrorSourceConnector" records to the worker's
        # offsetStorageTopic, which the connect-offsets feed then reads.
        assert flow.connect_offsets_topic == target["offsetStorageTopic"]
        transactional = str(target.get("config", {}).get("exactly.once.source.support", "disabled")) == "enabled"
        assert flow.target_transactional is transactional


def test_the_strimzi_kustomization_builds_with_kubectl(tmp_path):
    """The real tool: `kubectl kustomize` renders the directory; every object validates (Strimzi's
    against its CRD schema), and the Deployment mounts the ConfigMap made of the very resource."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl not installed (Debian: kubernetes-client; or kubectl from dl.k8s.io)")
    rendered = [d for d in yaml.safe_load_all(run_tool([kubectl, "kustomize", str(STRIMZI_DIR)]).stdout) if d]
    kinds = sorted(d["kind"] for d in rendered)
    assert kinds == ["ConfigMap", "ConfigMap", "Deployment", "KafkaMirrorMaker2", "PersistentVolumeClaim", "Service"]
    for doc in rendered:
        if doc["kind"] == "KafkaMirrorMaker2":
            assert not list(strimzi_validator().iter_errors(doc))
        else:
            kubernetes_validate.validate(doc, KUBERNETES_VERSIONS[-1], strict=True)
    (deployment,) = [d for d in rendered if d["kind"] == "Deployment"]
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    generated = volumes["kafkamirrormaker2"]["configMap"]["name"]
    assert generated.startswith("mirrorlag-kafkamirrormaker2-")  # the hash suffix: a changed resource rolls the pod
    (config_map,) = [d for d in rendered if d["kind"] == "ConfigMap" and d["metadata"]["name"] == generated]
    assert config_map["data"]["kafkamirrormaker2.yaml"] == (STRIMZI_DIR / "kafkamirrormaker2.yaml").read_text()


def test_rollup_cronjob_reads_the_history_claim_and_its_argv_parses():
    (cronjob,) = by_kind("CronJob").values()
    pod = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    argv = container["command"] + container["args"]
    assert argv[0] == "spark-submit" and argv[argv.index("--deploy-mode") + 1] == "client"
    script = next(a for a in argv if a.endswith(".py"))
    assert script == ROLLUP_ENTRY
    # Executors get mirrorlag the documented way: the zip the image writes, on --py-files.
    assert argv[argv.index("--py-files") + 1] == rollup_image_zip()
    args = mirrorlag.cli.build_parser().parse_args(["rollup", *argv[argv.index(script) + 1:]])
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    history = mounts[args.history]
    # Writable: the rollup leaves its receipt of each day in the history, which expiry waits for.
    assert not history.get("readOnly") and not volumes[history["name"]]["persistentVolumeClaim"].get("readOnly")
    sidecar_claims = {v["persistentVolumeClaim"]["claimName"] for _, pod_spec in pod_specs()
                      for v in pod_spec["volumes"] if "persistentVolumeClaim" in v and pod_spec is not pod}
    assert volumes[history["name"]]["persistentVolumeClaim"]["claimName"] in sidecar_claims
    assert not mounts[args.out].get("readOnly")
    rule = cronjob["spec"]["jobTemplate"]["spec"]["podFailurePolicy"]["rules"][0]
    assert rule["action"] == "FailJob" and rule["onExitCodes"]["values"] == [3]
    # Late data (docs/design.md §7): no --date, so every night looks back over the history's retention and
    # rolls up what is new or changed; a failed Job is retried; a missed night is caught up.
    assert args.date is None and args.date_from is None and not args.force
    retention_ms = int(GLOBAL_KEYS["mirrorlag.history.retention.ms"][1])
    assert args.lookback_days * 86_400_000 == retention_ms
    assert args.settle_minutes >= 30  # after the last segment of the day (segment.ms 5 min) is uploaded
    job = cronjob["spec"]["jobTemplate"]["spec"]
    assert job["backoffLimit"] >= 1 and cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    hour, minute = (int(x) for x in cronjob["spec"]["schedule"].split()[1::-1])
    assert hour * 60 + minute >= args.settle_minutes  # yesterday is final when the night runs


def test_rollup_cronjob_command_runs_with_spark_submit(tmp_path):
    """The CronJob's argv for real: this venv's spark-submit (PySpark's) in client mode, the image's
    installed __main__.py mapped onto this checkout's, the volumes onto empty directories. No
    history in the whole lookback: the rollup must say so with exit 3 (which the CronJob does not
    retry), before starting Spark."""
    (cronjob,) = by_kind("CronJob").values()
    (container,) = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    package = Path(mirrorlag.__file__).parent
    shipped = subprocess.run([sys.executable, "-m", "mirrorlag.rollup.ship", str(tmp_path / "mirrorlag.zip")],
                             capture_output=True, text=True, timeout=60)
    assert shipped.returncode == 0, shipped.stderr
    mapped = {"/opt/mirrorlag/lib/python3.11/site-packages/mirrorlag/": f"{package}/",
              rollup_image_zip(): str(tmp_path / "mirrorlag.zip")}
    for mount in container["volumeMounts"]:
        local = tmp_path / mount["name"]
        local.mkdir()
        mapped[mount["mountPath"]] = str(local)
    argv = []
    for arg in container["command"] + container["args"]:
        for prefix, local in mapped.items():
            if arg.startswith(prefix):
                arg = local + arg[len(prefix):]
                break  # once: a checkout under /tmp must not be mapped again onto the /tmp volume
        argv.append(arg)
    argv[0] = str(Path(sys.executable).parent / "spark-submit")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path)
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert "7 of 7 days have no history under" in proc.stdout + proc.stderr
