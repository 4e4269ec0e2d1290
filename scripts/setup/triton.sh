#!/usr/bin/env bash
# A real Triton Inference Server for the tests, the quick start and the benchmarks (CPU, Python backend):
#   - Debian libraries it needs when missing: libpython3.11 (the Python-backend stub links it), libb64-0d
#     (perf_analyzer, benchmarks/)
#   - PyPI's nvidia-pytriton (pinned in tools/triton-requirements.txt) in its own tool environment .tools/triton,
#     without its Python dependencies: only the server it bundles is used, and its metadata pins numpy<2, which the
#     project's environment does not need
#   - the Python models' environment (images/triton-ft/requirements.txt) and backend directory, cached under
#     ~/.cache/tritonft (python -m tritonft.local_triton prepare)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

missing=()
for package in libpython3.11 libb64-0d; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "bootstrap: installing Debian packages ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ ! -x .tools/triton/bin/python ] || ! cmp -s tools/triton-requirements.txt .tools/triton/requirements.txt; then
  echo "bootstrap: installing nvidia-pytriton (bundled tritonserver) into .tools/triton" >&2
  rm -rf .tools/triton
  uv venv --quiet --python "$(.venv/bin/python -c 'import sys; print(sys.executable)')" .tools/triton
  uv pip install --quiet --no-deps --python .tools/triton/bin/python -r tools/triton-requirements.txt
  cp tools/triton-requirements.txt .tools/triton/requirements.txt
fi

.venv/bin/python -m tritonft.local_triton prepare >/dev/null
