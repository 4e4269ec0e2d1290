"""Benchmark scripts (run as files: `.venv/bin/python benchmarks/<name>.py`); a package so they can share code."""
