"""Shared by the tests of deploy/: paths, YAML documents, the Dockerfile's instructions, mirrorlag's
own argument parser and config loader, Strimzi's CRD schemas, and the metric names a PromQL expression uses."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any, Iterator

import jsonschema
import yaml

from mirrorlag.cli import build_parser
from mirrorlag.config import load_settings
from mirrorlag.config.settings import Settings
from mirrorlag.config.strimzi import StrimziSource

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
CONFIG = REPO / "config"
PROMETHEUS = DEPLOY / "prometheus"
RULES = PROMETHEUS / "mirrorlag-rules.yml"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "mirrorlag.json"
SCHEMAS = Path(__file__).resolve().parent / "schemas"


def yaml_docs(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def kubernetes_docs() -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every object the manifests hold; kustomize's own kustomization.yaml files are not objects."""
    for path in sorted((DEPLOY / "kubernetes").rglob("*.yaml")):
        if path.name != "kustomization.yaml":
            for doc in yaml_docs(path):
                yield path, doc


def run_args(argv: list[str]) -> argparse.Namespace:
    """A `mirrorlag run` command line parsed by mirrorlag's own parser (argparse exits 2 on anything
    `mirrorlag run` would reject)."""
    args = build_parser().parse_args(argv)
    assert args.command == "run", argv
    return args


def parse_run(argv: list[str]) -> list[str]:
    """The --config files of a `mirrorlag run` command line."""
    return run_args(argv).config or []


def load_config_texts(tmp_path: Path, texts: dict[str, str], strimzi: str | None = None) -> Settings:
    """Write each properties text to tmp_path/<name> and load them in order as `mirrorlag run` would,
    over a KafkaMirrorMaker2 resource's text as `--strimzi` reads it, if given."""
    paths = []
    for name, text in texts.items():
        path = tmp_path / Path(name).name
        path.write_text(text)
        paths.append(path)
    resource = None
    if strimzi is not None:
        resource = tmp_path / "kafkamirrormaker2.yaml"
        resource.write_text(strimzi)
    return load_settings(paths, StrimziSource(resource) if resource else None)


def properties(path: Path) -> dict[str, str]:
    """Key -> value of a .properties file (enough for the plain `key = value` lines used here)."""
    out = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")):
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


# --- Dockerfile ------------------------------------------------------------------------------

def dockerfile_instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        text = pending + line
        pending = ""
        keyword, _, rest = text.partition(" ")
        out.append((keyword.upper(), rest.strip()))
    return out


def exec_form(arguments: str) -> list[str]:
    """The argv of an exec-form (JSON array) instruction; shell form is refused: signals would go
    to /bin/sh instead of mirrorlag."""
    argv = json.loads(arguments)
    assert isinstance(argv, list) and all(isinstance(a, str) for a in argv), arguments
    return argv


def last(instructions: list[tuple[str, str]], keyword: str) -> str:
    values = [rest for kw, rest in instructions if kw == keyword]
    assert values, f"no {keyword}"
    return values[-1]


# --- PromQL ----------------------------------------------------------------------------------

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_LABELS = re.compile(r"\{[^{}]*\}")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_RANGE = re.compile(r"\[[^\]]*\]")
_IDENT = re.compile(r"(?<![\w:$])[a-zA-Z_:][a-zA-Z0-9_:]*")
_NOT_METRICS = {
    "sum", "min", "max", "avg", "count", "topk", "bottomk", "quantile", "stddev", "stdvar",
    "count_values", "group", "rate", "irate", "increase", "delta", "idelta", "deriv", "changes",
    "resets", "histogram_quantile", "time", "vector", "scalar", "abs", "absent", "clamp_min",
    "clamp_max", "min_over_time", "max_over_time", "avg_over_time", "last_over_time",
    "sum_over_time", "count_over_time", "label_values", "and", "or", "unless", "offset", "bool",
    "by", "without", "on", "ignoring", "group_left", "group_right", "humanize",
}


def metric_names(expr: str) -> set[str]:
    """The metric (and recording rule) names an expression selects."""
    text = _STRING.sub('""', expr)
    text = _LABELS.sub("", text)
    text = _GROUPING.sub("", text)
    text = _RANGE.sub("", text)
    text = re.sub(r"\b\d+(?:\.\d+)?(?:e[+-]?\d+)?[smhdwy]?\b", "", text)
    return {name for name in _IDENT.findall(text) if name not in _NOT_METRICS}


def promtool_check_exprs(promtool: str, tmp_path: Path, exprs: dict[str, str]) -> None:
    """Let promtool parse each expression (as a recording rule: `promtool check rules` runs
    Prometheus's own PromQL parser)."""
    rules = {"groups": [{"name": "syntax", "rules": [
        {"record": f"check:expr_{i}", "expr": expr} for i, expr in enumerate(exprs.values())]}]}
    path = tmp_path / "exprs.yml"
    path.write_text(yaml.safe_dump(rules))
    proc = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stdout + proc.stderr + "\n" + "\n".join(
        f"{name}: {expr}" for name, expr in exprs.items())


def run_tool(argv: list[str], timeout: float = 60, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kwargs)
    assert proc.returncode == 0, f"{shlex.join(argv)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc


ROLLUP_DOCKERFILE = DEPLOY / "Dockerfile.rollup"
ROLLUP_ENTRY = "/opt/mirrorlag/lib/python3.11/site-packages/mirrorlag/rollup/__main__.py"


def rollup_image_zip() -> str:
    """The zip of mirrorlag the rollup image writes for executors (`python -m mirrorlag.rollup.ship PATH`)."""
    runs = " ".join(rest for kw, rest in dockerfile_instructions(ROLLUP_DOCKERFILE) if kw == "RUN")
    m = re.search(r"-m mirrorlag\.rollup\.ship (\S+\.zip)", runs)
    assert m, "Dockerfile.rollup does not write the executors' zip"
    return m[1]


def _no_pruning(schema: Any) -> Any:
    """Strimzi's structural schema, with additionalProperties: false wherever the API server would
    silently prune unknown fields (objects with properties and no preserve-unknown-fields)."""
    if isinstance(schema, dict):
        out = {k: _no_pruning(v) for k, v in schema.items()}
        if out.get("type") == "object" and "properties" in out and not out.get("x-kubernetes-preserve-unknown-fields") \
                and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_no_pruning(v) for v in schema]
    return schema


def strimzi_validator(version: str = "v1") -> jsonschema.Validator:
    """Strimzi's KafkaMirrorMaker2 CRD schema of `version` (v1 or v1beta2, vendored: schemas/README.md)."""
    crd = json.loads((SCHEMAS / f"strimzi-kafkamirrormaker2-{version}.json").read_text())
    assert (crd["group"], crd["version"], crd["kind"]) == ("kafka.strimzi.io", version, "KafkaMirrorMaker2")
    schema = _no_pruning(crd["openAPIV3Schema"])
    schema["properties"]["metadata"] = {"type": "object", "required": ["name"]}
    return jsonschema.Draft4Validator(schema)  # OpenAPI v3.0 schemas are draft-4 style
