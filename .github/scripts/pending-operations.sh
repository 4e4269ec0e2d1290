#!/usr/bin/env bash
# After a failed, timed-out or cancelled `up` (and `pulumi cancel`): name the operations the stack's state still holds
# as pending, in the job's summary with their repair, and fail the job naming them.
#   pending-operations.sh STACK
# A step timeout kills `up` mid-operation: a create AWS started (an EKS cluster, a node group, an IAM role) is in the
# state only as a pending create, and the next push's non-interactive `up` drops it: the resource lives on in AWS,
# unknown to the stack, and a fixed name then fails "already exists". Repair before the next deploy (docs/day2.md).
set -euo pipefail
stack="${1:?usage: pending-operations.sh STACK}"
summary="${GITHUB_STEP_SUMMARY:-/dev/null}"
if ! state=$(pulumi stack export --stack "$stack"); then
  echo "::error::stack $stack: could not read its state (pulumi stack export): look for pending operations by hand before the next deploy (docs/day2.md)"
  exit 1
fi
# One line per pending operation: <operation> <resource type> <URN> [<provider ID, when the state has one>]
pending=$(jq -r '(.deployment.pending_operations // [])[]
  | [.type, .resource.type, .resource.urn, (.resource.id // "")] | @tsv' <<<"$state")
if [ -z "$pending" ]; then
  echo "stack $stack: no pending operations"
  exit 0
fi
count=$(wc -l <<<"$pending")
{
  echo "## Stack \`$stack\`: $count pending operation(s) left by the interrupted \`up\`"
  echo
  echo "Do not re-run the deploy first: its \`up\` would drop them, leaving what AWS created outside the stack."
  echo
  echo "| operation | type | URN | ID |"
  echo "| --- | --- | --- | --- |"
  while IFS=$'\t' read -r operation type urn id; do
    echo "| $operation | \`$type\` | \`$urn\` | ${id:+\`$id\`} |"
  done <<<"$pending"
  echo
  echo "Repair from a workstation with the deploy role (docs/day2.md, \"A hung up fails, and says what it left\"):"
  echo
  echo "1. For each \`creating\`: find the resource in AWS by its name (the URN's last segment; the console or \`aws\`)."
  echo "   If it exists, import it: \`pulumi refresh -s $stack --import-pending-creates <URN> --import-pending-creates <its ID>\`."
  echo "   If it is half-made or absent, delete it in AWS if present, then \`pulumi refresh -s $stack --clear-pending-creates\`."
  echo "2. Other operations (\`updating\`, \`deleting\`): \`pulumi refresh -s $stack\` reads them back from AWS."
  echo "3. \`pulumi stack export -s $stack | jq '.deployment.pending_operations'\` is empty; then re-run this job."
} >>"$summary"
while IFS=$'\t' read -r operation type urn id; do
  echo "::error::stack $stack: pending $operation of $type $urn${id:+ (ID $id)}: repair it before the next deploy (docs/day2.md; the job's summary)"
done <<<"$pending"
exit 1
