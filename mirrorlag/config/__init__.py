"""mirrorlag's configuration: `load_settings(paths)` reads MM2 .properties files into `Settings`."""

from mirrorlag.config.loader import load_settings
from mirrorlag.config.settings import ClusterSettings, EngineParams, FlowSettings, Settings

__all__ = ["load_settings", "Settings", "FlowSettings", "ClusterSettings", "EngineParams"]
