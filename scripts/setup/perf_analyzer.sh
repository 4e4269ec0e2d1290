#!/usr/bin/env bash
# perf_analyzer 2.48 (Triton's load tool: `tritonft bench` runs it for the KServe V2 endpoints) in its own tool
# environment .tools/perf, outside the project's venv: the tritonclient==2.48.0 manylinux wheel ships the binary
# (tritonclient-2.48.0.data/data/bin/perf_analyzer); it needs Debian's libb64-0d (scripts/setup/triton.sh installs
# it) and a libcudart.so.12 (nvidia-cuda-runtime-cu12), found by `tritonft bench` in the same environment. Both
# wheels without their dependencies (pinned with hashes in tools/perf-analyzer-requirements.txt): only the binary
# and the library are used. It runs on glibc >= 2.34 and libstdc++ with GLIBCXX_3.4.30 (Debian bookworm).
# Prints the path of perf_analyzer.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

bash scripts/setup/triton.sh
if [ ! -x .tools/perf/bin/perf_analyzer ] || ! cmp -s tools/perf-analyzer-requirements.txt .tools/perf/requirements.txt; then
  echo "setup: installing perf_analyzer (tritonclient 2.48.0) into .tools/perf" >&2
  rm -rf .tools/perf
  uv venv --quiet --python "$(.venv/bin/python -c 'import sys; print(sys.executable)')" .tools/perf
  uv pip install --quiet --no-deps --python .tools/perf/bin/python -r tools/perf-analyzer-requirements.txt
  cp tools/perf-analyzer-requirements.txt .tools/perf/requirements.txt
fi
echo "$PWD/.tools/perf/bin/perf_analyzer"
