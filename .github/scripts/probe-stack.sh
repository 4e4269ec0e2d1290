#!/usr/bin/env bash
# Probe a deployed stack from outside the cluster, through its edge as a client would: every model asked for a
# correct answer on its public endpoint (an encoder's) and, with a gateway, through the OpenAI API (a
# FasterTransformer or vLLM model, whose Triton has no route at the edge, there only).
#   probe-stack.sh STACK
# Reads the outputs the stack exports (`models`, `endpoints`, `openaiBaseUrl`: .github/scripts/probe_targets.py)
# and, when the edge checks API keys, the probe's own key (`apiKeys.probe`, a secret output: masked in the log, given
# to the probe through the environment, never on a command line). Behind an `edge: ingress` with auth, the header
# comes from TRITONFT_PROBE_AUTHORIZATION instead. PROBE_ARGS: extra `tritonft probe` arguments. Exits non-zero
# when an output is missing or any model fails.
set -euo pipefail
stack="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
pulumi stack output --stack "$stack" --json > "$work/outputs.json"
python3 .github/scripts/probe_targets.py "$work/outputs.json" "$stack" "$work/specs" > "$work/targets.tsv" || {
  cat "$work/targets.tsv"
  exit 1
}
headers=()
if jq -e 'has("apiKeys")' "$work/outputs.json" >/dev/null; then
  key=$(pulumi stack output --stack "$stack" apiKeys --show-secrets --json | jq -r '.probe // empty')
  if [ -z "$key" ]; then
    echo "::error::stack $stack: the edge checks API keys but apiKeys has no 'probe' key"
    exit 1
  fi
  echo "::add-mask::$key"
  export PROBE_AUTHORIZATION="Bearer $key"
  headers=(--header-from-env Authorization=PROBE_AUTHORIZATION)
elif [ -n "${TRITONFT_PROBE_AUTHORIZATION:-}" ]; then
  headers=(--header-from-env Authorization=TRITONFT_PROBE_AUTHORIZATION)
fi
while IFS=$'\t' read -r model url spec gateway; do
  gateway_args=() url_args=()
  [ "$gateway" = - ] || gateway_args=(--gateway "$gateway")
  if [ "$url" = - ]; then # no route of its own at the edge (FasterTransformer, vLLM): the gateway alone
    echo "probing $model through the gateway at $gateway"
  else
    url_args=(--url "$url")
    echo "probing $model at $url${gateway_args[*]:+ and through the gateway at $gateway}"
  fi
  # shellcheck disable=SC2086  # PROBE_ARGS is a list of extra arguments
  tritonft probe "${url_args[@]}" --spec "$spec" "${headers[@]}" "${gateway_args[@]}" ${PROBE_ARGS:-}
done < "$work/targets.tsv"
