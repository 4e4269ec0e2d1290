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
# Tests never write into the work tree: files the suite leaves behind (untracked, not ignored) fail the run.
untracked() { git ls-files --others --exclude-standard 2>/dev/null | sort; }
before=$(untracked)
run timeout 3000 .venv/bin/pytest -q -p no:cacheprovider "$@"
left=$(comm -13 <(echo "$before") <(untracked))
if [ -n "$left" ]; then
  echo "the test suite left untracked files in the work tree (tests must write under tmp_path):" >&2
  echo "$left" | sed 's/^/  /' >&2
  status=1
fi
exit $status
