#!/usr/bin/env bash
# Build the server and tools images once per content and print their digests for the stacks to promote.
#   usage: build-images.sh REGISTRY   (e.g. 123456789012.dkr.ecr.us-west-2.amazonaws.com/triton-ft)
# For each image of `python -m components.platform.build_plan` (context, Dockerfile, build args, content tag):
# when REGISTRY/<name>:<tag> exists (tags are immutable there) its digest is reused and nothing is built;
# otherwise it is built and pushed with a registry cache. Writes `server-image=` and `tools-image=` lines
# (`REGISTRY/<name>@sha256:...`) to $GITHUB_OUTPUT, or to stdout outside Actions.
set -euo pipefail
registry="${1:?usage: build-images.sh REGISTRY}"
out="${GITHUB_OUTPUT:-/dev/stdout}"
plan=$(python -m components.platform.build_plan .)
for name in server tools; do
  entry=$(jq -c --arg n "$name" '.[] | select(.name == $n)' <<<"$plan")
  context=$(jq -r .context <<<"$entry")
  dockerfile=$(jq -r .dockerfile <<<"$entry")
  platform=$(jq -r .platform <<<"$entry")
  tag=$(jq -r .tag <<<"$entry")
  ref="$registry/$name:$tag"
  if digest=$(docker buildx imagetools inspect "$ref" --format '{{json .Manifest}}' 2>/dev/null | jq -r .digest); then
    echo "$name: $ref exists ($digest); not rebuilt" >&2
  else
    build_args=()
    while IFS= read -r arg; do build_args+=(--build-arg "$arg"); done \
      < <(jq -r '.buildArgs | to_entries[] | "\(.key)=\(.value)"' <<<"$entry")
    docker buildx build --platform "$platform" --file "$dockerfile" "${build_args[@]}" \
      --cache-from "type=registry,ref=$registry/build-cache:$name" \
      --cache-to "type=registry,ref=$registry/build-cache:$name,mode=max,image-manifest=true,oci-mediatypes=true" \
      --tag "$ref" --push --metadata-file "/tmp/$name-build.json" "$context"
    digest=$(jq -r '."containerimage.digest"' "/tmp/$name-build.json")
  fi
  echo "$name-image=$registry/$name@$digest" >> "$out"
done
