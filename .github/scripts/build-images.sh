#!/usr/bin/env bash
# Build every image the stacks run, once, on bases pinned by digest, and print their digests for the stacks to promote.
#   usage: build-images.sh REGISTRY   (e.g. 123456789012.dkr.ecr.us-west-2.amazonaws.com/triton-ft)
# The images are `python -m components.platform.build_plan`'s: server (FasterTransformer), tools, and one server
# image per other engine (server-onnxruntime, server-vllm), whatever the stacks' engines need today.
#   1. Free disk: the largest build needs BUILD_DISK_GIB (the plan's figure); the job stops here, in seconds, on a
#      runner that is too small (a GitHub-hosted runner has ~14 GB; IMAGE_BUILD_RUNNER names a larger one).
#   2. Bases: each base a Dockerfile leaves a tag alone is looked up in its registry ONCE; every build of this run
#      gets it pinned by that digest, and REQUIRE_PINNED_BASE=true (the Dockerfiles refuse an unpinned base).
#   3. Builds: no registry build cache (a mutable repository anyone who can push to could slip layers into), pulled
#      bases only, and a tag of this run (<content tag>-<RUN_TAG>) that no registry holds yet: nothing already in the
#      registry under some tag is ever promoted in place of what this run built (ECR's IMMUTABLE tags refuse a clash).
#      Each image is pushed as one manifest (no provenance or SBOM attestations: no image index whose untagged children
#      the repositories' lifecycle policy could expire from under a running digest; components/platform/
#      promotion_lifecycle.py). The builder's local layers are pruned between images (disk).
# Writes `<name>-image=REGISTRY/<name>@sha256:...` for each image, `engine-images=` (a JSON mapping engine ->
# reference, for `engineImages`) and `base-digests=` (JSON, what the bases resolved to) to $GITHUB_OUTPUT, or to
# stdout outside Actions. RUN_TAG defaults to `r<GITHUB_RUN_ID>.<GITHUB_RUN_ATTEMPT>`.
set -euo pipefail
registry="${1:?usage: build-images.sh REGISTRY}"
out="${GITHUB_OUTPUT:-/dev/stdout}"
run_tag="${RUN_TAG:-r${GITHUB_RUN_ID:?set RUN_TAG or GITHUB_RUN_ID}.${GITHUB_RUN_ATTEMPT:-1}}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

need_gib=$(python -c 'from components.platform.build_plan import BUILD_DISK_GIB; print(BUILD_DISK_GIB)')
disk_path="${DOCKER_DATA_ROOT:-/var/lib/docker}"
[ -d "$disk_path" ] || disk_path=/
free_gib=$(( $(df -Pk "$disk_path" | awk 'NR == 2 {print $4}') / 1024 / 1024 ))
if [ "$free_gib" -lt "$need_gib" ]; then
  echo "::error::$free_gib GiB free at $disk_path; the image builds need $need_gib GiB (FasterTransformer's compile, NGC's vLLM base). Set the repository variable IMAGE_BUILD_RUNNER to a larger runner (docs/aws.md)"
  exit 1
fi

# 2. Each unpinned base, looked up once.
bases=$(python -m components.platform.build_plan . --bases)
digests='{}'
while IFS= read -r ref; do
  [ -n "$ref" ] || continue
  digest=$(docker buildx imagetools inspect "$ref" --format '{{json .Manifest}}' | jq -r .digest)
  if [[ ! "$digest" =~ ^sha256:[0-9a-f]{64}$ ]]; then
    echo "::error::could not read the digest of base $ref (got '$digest')"
    exit 1
  fi
  echo "base $ref -> $digest" >&2
  digests=$(jq -c --arg r "$ref" --arg d "$digest" '. + {($r): $d}' <<<"$digests")
done < <(jq -r '.[]' <<<"$bases")
printf '%s' "$digests" > "$work/base-digests.json"
plan=$(python -m components.platform.build_plan . --base-digests "$work/base-digests.json")

# 3. Every image, built from scratch and pushed under this run's own tag.
engines='{}'
for name in $(jq -r '.[].name' <<<"$plan"); do
  entry=$(jq -c --arg n "$name" '.[] | select(.name == $n)' <<<"$plan")
  context=$(jq -r .context <<<"$entry")
  dockerfile=$(jq -r .dockerfile <<<"$entry")
  platform=$(jq -r .platform <<<"$entry")
  ref="$registry/$name:$(jq -r .tag <<<"$entry")-$run_tag"
  build_args=()
  while IFS= read -r arg; do build_args+=(--build-arg "$arg"); done \
    < <(jq -r '.buildArgs | to_entries[] | "\(.key)=\(.value)"' <<<"$entry")
  docker buildx build --pull --platform "$platform" --provenance=false --sbom=false --file "$dockerfile" \
    "${build_args[@]}" --tag "$ref" --push --metadata-file "$work/$name-build.json" "$context"
  digest=$(jq -r '."containerimage.digest"' "$work/$name-build.json")
  if [[ ! "$digest" =~ ^sha256:[0-9a-f]{64}$ ]]; then
    echo "::error::the build of $name reported no digest"
    exit 1
  fi
  echo "$name: built and pushed $ref ($digest)" >&2
  echo "$name-image=$registry/$name@$digest" >> "$out"
  engine=$(jq -r '.engine // empty' <<<"$entry")
  if [ -n "$engine" ] && [ "$name" != server ]; then
    engines=$(jq -c --arg e "$engine" --arg r "$registry/$name@$digest" '. + {($e): $r}' <<<"$engines")
  fi
  docker buildx prune --all --force >/dev/null
done
echo "engine-images=$engines" >> "$out"
echo "base-digests=$digests" >> "$out"
