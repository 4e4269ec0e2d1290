#!/usr/bin/env bash
# The project's test command: install (idempotent), then lint, format check, type check and the whole test suite.
# Exits non-zero when any of them fails.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/bootstrap.sh

status=0
run() {
  echo "+ $*" >&2
  "$@" || status=1
}
run .venv/bin/ruff check .
run .venv/bin/ruff format --check .
run .venv/bin/mypy
run timeout 3000 .venv/bin/pytest -q -p no:cacheprovider "$@"
exit $status
