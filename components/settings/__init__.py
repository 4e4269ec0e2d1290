"""Stack settings: the schema, the validator and the typed result (pure; no Pulumi import)."""

from components.settings.load import load_settings
from components.settings.model import Settings

__all__ = ["Settings", "load_settings"]
