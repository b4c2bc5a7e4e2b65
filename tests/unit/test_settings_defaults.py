"""One source of truth for defaults: a `Settings` built in code (tests, the demo) means what a
configuration that sets nothing means to the loader."""

from __future__ import annotations

import dataclasses

from mirrorlag.config import load_settings
from mirrorlag.config.settings import Settings


def test_settings_field_defaults_are_the_loaders(tmp_path):
    config = tmp_path / "mm2.properties"
    config.write_text("clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\nA->B.enabled = true\n")
    loaded = load_settings([config])
    built = Settings(files=loaded.files, clusters=loaded.clusters, flows=loaded.flows)
    differ = {f.name: (getattr(built, f.name), getattr(loaded, f.name))
              for f in dataclasses.fields(Settings) if f.compare and getattr(built, f.name) != getattr(loaded, f.name)}
    assert differ == {}, f"Settings' field default differs from the loader's (field: (dataclass, loader)): {differ}"
