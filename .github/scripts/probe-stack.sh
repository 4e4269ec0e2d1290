#!/usr/bin/env bash
# Probe a deployed stack from outside the cluster: read its outputs and ask every model for a correct answer.
#   probe-stack.sh STACK
# Environment: ENDPOINT_OUTPUT (stack output holding the endpoint URL, default `endpoint`), PROBE_ARGS (extra
# `tritonft probe` arguments, e.g. `--protocol http`). Exits non-zero when any model fails.
set -euo pipefail
stack="$1"
pulumi stack output --stack "$stack" --json > "outputs-$stack.json"
url="$(python3 -c 'import json,sys; o=json.load(open(sys.argv[1])); print(o.get(sys.argv[2]) or "")' "outputs-$stack.json" "${ENDPOINT_OUTPUT:-endpoint}")"
if [ -z "$url" ]; then
  echo "::error::stack $stack has no '${ENDPOINT_OUTPUT:-endpoint}' output; set the ENDPOINT_OUTPUT variable"
  exit 1
fi
mapfile -t models < <(python3 -c 'import json,sys; print("\n".join(json.load(open(sys.argv[1])).get("models", [])))' "outputs-$stack.json")
if [ "${#models[@]}" -eq 0 ]; then
  echo "::error::stack $stack exports no models"
  exit 1
fi
for model in "${models[@]}"; do
  echo "probing $model at $url"
  # shellcheck disable=SC2086  # PROBE_ARGS is a list of extra arguments
  tritonft probe --url "$url" --model "$model" ${PROBE_ARGS:-}
done
