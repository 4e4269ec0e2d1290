#!/usr/bin/env bash
# perf_analyzer for the benchmarks: the same tool environment `tritonft bench` uses (scripts/setup/perf_analyzer.sh).
# Prints the path of perf_analyzer; run it with LD_LIBRARY_PATH=$(dirname of libcudart.so.12) (see triton_bench.py).
set -euo pipefail
exec bash "$(dirname "${BASH_SOURCE[0]}")/../scripts/setup/perf_analyzer.sh"
