#!/usr/bin/env bash
# Mark the images a stage deploys by digest, in their ECR repositories: the tag `<stage>-<mark>-<run tag>` added to the
# very manifest (ECR's PutImage with the image's own manifest: no bytes move).
#   mark-promoted.sh STAGE try    before the stage's `up`: the stage may run them from now on, even if `up` fails
#   mark-promoted.sh STAGE live   after its `up` and probe succeeded: the stage runs them
# (SERVER_IMAGE, TOOLS_IMAGE, ENGINE_IMAGES: the references stack-config.sh promotes.)
# The repositories' lifecycle policy (`python -m components.platform.promotion_lifecycle`, docs/aws.md) keeps the
# newest `live` images of each stage, so an image a stack runs never expires however many pushes follow, failed ones
# included (a failed `up` adds only `try`, which is kept by age and never counted). RUN_TAG defaults to
# `r<GITHUB_RUN_ID>.<GITHUB_RUN_ATTEMPT>`. A tag this step already added to this digest (the step re-run) is fine; a
# tag holding another digest stops the job (ECR's IMMUTABLE tags refuse it).
set -euo pipefail
usage="usage: mark-promoted.sh STAGE try|live"
stage="${1:?$usage}"
mark="${2:?$usage}"
case "$mark" in
  try) kept="kept while $stage may run it" ;;
  live) kept="kept among $stage's newest live images" ;;
  *) echo "::error::$usage (not $mark)"; exit 2 ;;
esac
run_tag="${RUN_TAG:-r${GITHUB_RUN_ID:?set RUN_TAG or GITHUB_RUN_ID}.${GITHUB_RUN_ATTEMPT:-1}}"
tag="$stage-$mark-$run_tag"
refs=()
for ref in "${SERVER_IMAGE:-}" "${TOOLS_IMAGE:-}"; do
  [ -z "$ref" ] || refs+=("$ref")
done
if [ -n "${ENGINE_IMAGES:-}" ]; then
  while IFS= read -r ref; do refs+=("$ref"); done < <(jq -r '.[] | select(. != "")' <<<"$ENGINE_IMAGES")
fi
for ref in "${refs[@]}"; do
  # <account>.dkr.ecr.<region>.amazonaws.com/<repository>@sha256:<digest>
  if [[ ! "$ref" =~ ^([0-9]{12})\.dkr\.ecr\.([a-z0-9-]+)\.amazonaws\.com/([^@:]+)(:[^@]+)?@(sha256:[0-9a-f]{64})$ ]]; then
    echo "::error::$ref is not an ECR image pinned by digest (<account>.dkr.ecr.<region>.amazonaws.com/<repository>@sha256:...)"
    exit 1
  fi
  account="${BASH_REMATCH[1]}" region="${BASH_REMATCH[2]}" repository="${BASH_REMATCH[3]}" digest="${BASH_REMATCH[5]}"
  image=$(aws ecr batch-get-image --region "$region" --registry-id "$account" --repository-name "$repository" \
    --image-ids "imageDigest=$digest" --output json)
  manifest=$(jq -r '.images[0].imageManifest // empty' <<<"$image")
  if [ -z "$manifest" ]; then
    echo "::error::$repository@$digest is not in the registry: $(jq -c '.failures' <<<"$image")"
    exit 1
  fi
  media_type=$(jq -r '.images[0].imageManifestMediaType' <<<"$image")
  if ! answer=$(aws ecr put-image --region "$region" --registry-id "$account" --repository-name "$repository" \
    --image-tag "$tag" --image-digest "$digest" --image-manifest "$manifest" \
    --image-manifest-media-type "$media_type" --output json 2>&1); then
    if [[ "$answer" != *ImageAlreadyExistsException* ]]; then
      echo "::error::could not tag $repository@$digest as $tag: $answer"
      exit 1
    fi
  fi
  echo "$repository@$digest: tagged $tag ($kept)"
done
