#!/usr/bin/env bash
# A real Triton Inference Server for the tests, the quick start and the benchmarks (CPU, Python backend):
#   - Debian libraries it needs when missing: libpython3.11 (the Python-backend stub links it), libb64-0d
#     (perf_analyzer, benchmarks/)
#   - PyPI's nvidia-pytriton in its own tool environments, without its Python dependencies (only the server it
#     bundles is used, and its metadata pins numpy<2, which the project's environment does not need):
#       .tools/triton       0.7.0 (tools/triton-requirements.txt): tritonserver 2.51.0, the encoders' server
#       .tools/triton-2.33  0.2.5 (tools/triton-2.33-requirements.txt): tritonserver 2.33.0 = NGC Triton 23.04, the
#                           FasterTransformer image's server; its one Python-backend stub is built for Python 3.8
#   - the Python models' environments (images/triton-ft/requirements.txt; for 2.33.0 the same resolved for Python
#     3.8, tools/triton-2.33-models-requirements.txt, on pyenv's 3.8) and backend directories, cached under
#     ~/.cache/tritonft (python -m tritonft.local_triton prepare)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

missing=()
for package in libpython3.11 libb64-0d; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "bootstrap: installing Debian packages ${missing[*]}" >&2
  # shellcheck source=scripts/setup/apt.sh
  source scripts/setup/apt.sh
  apt_install "${missing[@]}"
fi

install_server() {  # install_server ENV_DIR REQUIREMENTS
  local env=$1 requirements=$2
  if [ ! -x "$env/bin/python" ] || ! cmp -s "$requirements" "$env/requirements.txt"; then
    echo "bootstrap: installing nvidia-pytriton (bundled tritonserver) into $env" >&2
    rm -rf "$env"
    uv venv --quiet --python "$(.venv/bin/python -c 'import sys; print(sys.executable)')" "$env"
    uv pip install --quiet --no-deps --python "$env/bin/python" -r "$requirements"
    cp "$requirements" "$env/requirements.txt"
  fi
}
install_server .tools/triton tools/triton-requirements.txt
install_server .tools/triton-2.33 tools/triton-2.33-requirements.txt

.venv/bin/python -m tritonft.local_triton prepare >/dev/null
