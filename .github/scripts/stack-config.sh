#!/usr/bin/env bash
# Prepare one stack for a CI run (after the Pulumi CLI is installed and logged in):
#   - attach a Pulumi ESC environment when PULUMI_ESC_ENVIRONMENT is set (e.g. `triton-ft/dev`);
#   - set secrets from repository secrets when given (HF_TOKEN -> hfToken);
#   - promote the images the deploy workflow built once (SERVER_IMAGE -> serverImage, TOOLS_IMAGE -> toolsImage,
#     ENGINE_IMAGES, a JSON mapping engine -> reference, -> engineImages.<engine>; each `repository@sha256:...`):
#     the stack deploys those digests and builds nothing.
# With REQUIRE_PROMOTED_IMAGES=true (deploy.yml) every one of them must be given: an empty reference (a build step that
# wrote no output) stops the job here, naming the image, before `up` could build or deploy something else. Without
# it (pr.yml, review-stacks.yml: no image is promoted there) an image left empty keeps the stack file's own.
# Changes only the runner's copy of stacks/Pulumi.<stack>.yaml; values never reach the log.
set -euo pipefail
stack="$1"
required="${REQUIRE_PROMOTED_IMAGES:-false}"

missing() {
  echo "::error::stack $stack: the build job promoted no $1 ($2): the deploy would not run the bytes it built; look at the build job's 'Build every image the stacks run' step"
  exit 1
}

if [ "$required" = true ]; then
  [ -n "${SERVER_IMAGE:-}" ] || missing "server image (serverImage)" "SERVER_IMAGE is empty"
  [ -n "${TOOLS_IMAGE:-}" ] || missing "tools image (toolsImage)" "TOOLS_IMAGE is empty"
  [ -n "${ENGINE_IMAGES:-}" ] && [ "$(jq 'length' <<<"$ENGINE_IMAGES")" -gt 0 ] \
    || missing "engine server images (engineImages)" "ENGINE_IMAGES is empty"
  empty=$(jq -r 'to_entries[] | select(.value == "") | .key' <<<"$ENGINE_IMAGES" | paste -sd, -)
  [ -z "$empty" ] || missing "server image of engine(s) $empty (engineImages.$empty)" "ENGINE_IMAGES maps it to nothing"
fi

pulumi stack select --create "$stack" >/dev/null
if [ -n "${PULUMI_ESC_ENVIRONMENT:-}" ]; then
  pulumi config env add "$PULUMI_ESC_ENVIRONMENT" --yes --stack "$stack" >/dev/null
  echo "stack $stack: ESC environment $PULUMI_ESC_ENVIRONMENT attached"
fi
if [ -n "${HF_TOKEN:-}" ]; then
  printf '%s' "$HF_TOKEN" | pulumi config set --secret --stack "$stack" triton-ft:hfToken >/dev/null
  echo "stack $stack: hfToken set from the HF_TOKEN secret"
fi
if [ -n "${SERVER_IMAGE:-}" ]; then
  pulumi config set --stack "$stack" triton-ft:serverImage "$SERVER_IMAGE" >/dev/null
  echo "stack $stack: serverImage = $SERVER_IMAGE (built once by the deploy workflow)"
fi
if [ -n "${TOOLS_IMAGE:-}" ]; then
  pulumi config set --stack "$stack" triton-ft:toolsImage "$TOOLS_IMAGE" >/dev/null
  echo "stack $stack: toolsImage = $TOOLS_IMAGE (built once by the deploy workflow)"
fi
if [ -n "${ENGINE_IMAGES:-}" ]; then
  while IFS=$'\t' read -r engine ref; do
    pulumi config set --path --stack "$stack" "triton-ft:engineImages.$engine" "$ref" >/dev/null
    echo "stack $stack: engineImages.$engine = $ref (built once by the deploy workflow)"
  done < <(python3 -c 'import json,sys; [print(f"{k}\t{v}") for k, v in sorted(json.loads(sys.argv[1]).items())]' "$ENGINE_IMAGES")
fi
