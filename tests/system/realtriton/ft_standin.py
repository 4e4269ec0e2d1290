"""The FT stand-in for the real-Triton tests: see :mod:`tritonft.standin` (the quick start uses it too)."""

from tritonft.standin import make_standin, read_config, received, set_behaviour, standin_all

__all__ = ["make_standin", "read_config", "received", "set_behaviour", "standin_all"]
