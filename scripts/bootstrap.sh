#!/usr/bin/env bash
# Install everything the project needs on a fresh machine (idempotent, offline-safe after the first run):
#   - uv (pinned) if missing, then the locked Python environment in .venv (uv.lock, --frozen)
#   - checkov in its own tool environment .tools/checkov (its pins conflict with the project's)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

UV_VERSION=0.13.9
if ! command -v uv >/dev/null 2>&1 || [ "$(uv --version | awk '{print $2}')" != "$UV_VERSION" ]; then
  echo "bootstrap: installing uv $UV_VERSION" >&2
  python3 -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION"
fi

echo "bootstrap: syncing .venv from uv.lock" >&2
uv sync --frozen --quiet

if [ ! -x .tools/checkov/bin/checkov ] || ! cmp -s tools/checkov-requirements.txt .tools/checkov/requirements.txt; then
  echo "bootstrap: installing checkov into .tools/checkov" >&2
  rm -rf .tools/checkov
  uv venv --quiet --python "$(.venv/bin/python -c 'import sys; print(sys.executable)')" .tools/checkov
  uv pip install --quiet --python .tools/checkov/bin/python -r tools/checkov-requirements.txt
  cp tools/checkov-requirements.txt .tools/checkov/requirements.txt
fi
