"""The docs name only what the code has: every ``tritonft`` command and flag a page writes exists in that command's
parser, every stack key a page names exists in the settings schema, and every shell command of a page that reads one
of the committed stacks is accepted by the settings as written (with the secrets it says to assume)."""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

import pytest

from components.settings.schema import ARCHITECTURE_FIELDS, MODEL_KNOBS, STACK_KNOBS, VLLM_FIELDS
from components.settings.stack_file import settings_from_stack_file
from stackcli.cli import COMMANDS
from tests.stackcli.doc_commands import INLINE, PAGES, ROOT, Named, named_commands, option_strings, parser_of
from tritonft.errors import UserError

NAMED = [named for page in PAGES for named in named_commands(page)]


def test_every_tritonft_command_the_docs_name_exists() -> None:
    unknown = [f"{n.where}: `{n.text}`" for n in NAMED if n.command not in COMMANDS]
    assert not unknown, "commands the CLI does not have:\n" + "\n".join(unknown)


def test_every_flag_the_docs_give_a_tritonft_command_is_in_its_parser() -> None:
    options = {name: option_strings(name) for name in COMMANDS}
    stale = [
        f"{n.where}: {flag} (`{n.text[:100]}`)"
        for n in NAMED
        if n.command in options
        for flag in n.flags
        if flag not in options[n.command]
    ]
    assert not stale, "flags the command's parser does not have:\n" + "\n".join(stale)


def test_the_command_check_reads_blocks_inline_code_and_usage_lines(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "Run `tritonft synth --stack dev --no-such-flag` or `tritonft local --gpu`.\n"
        "```bash\n# needs-cloud: x\n.venv/bin/tritonft preflight --stack mine \\\n  --kubeconfig k  # --not-a-flag\n"
        'tritonft probe --spec s.json --gateway "$(pulumi stack output --show-secrets x)" && pulumi up\n```\n'
        "| `tritonft convert --input D [--[no-]normalize] [--dtype fp32\\|fp16]` |\n",
    )
    found = [(n.command, n.flags) for n in named_commands(page)]
    assert found == [
        ("preflight", ("--stack", "--kubeconfig")),
        ("probe", ("--spec", "--gateway")),
        ("synth", ("--stack", "--no-such-flag")),
        ("local", ("--gpu",)),
        ("convert", ("--input", "--normalize", "--no-normalize", "--dtype")),
    ]
    assert "--no-such-flag" not in option_strings("synth")
    assert "local" not in COMMANDS


def reads_a_committed_stack(named: Named) -> bool:
    """A ``synth`` or ``preflight`` line of a shell block whose ``--stack`` is one the repository commits."""
    stack = re.search(r"--stack (\S+)", named.text)
    return (
        named.shell
        and named.command in ("synth", "preflight")
        and stack is not None
        and (ROOT / "stacks" / f"Pulumi.{stack.group(1)}.yaml").is_file()
    )


STACK_COMMANDS = [n for n in NAMED if reads_a_committed_stack(n)]


@pytest.mark.parametrize("named", STACK_COMMANDS, ids=[f"{n.where} {n.text}" for n in STACK_COMMANDS])
def test_every_shell_command_on_a_committed_stack_is_accepted_by_its_settings_as_written(named: Named) -> None:
    args = parse(named)
    try:
        settings_from_stack_file(ROOT, args.stack, tuple(args.assume_secret))
    except UserError as exc:
        pytest.fail(f"{named.where}: `{named.text}` stops at the settings:\n{exc}")


def parse(named: Named) -> argparse.Namespace:
    return parser_of(named.command).parse_args(shlex.split(named.text)[2:])


def test_a_command_without_the_secret_a_stack_needs_is_refused() -> None:
    """Prod's gated Llama downloads with the ``hfToken`` stack secret, which the committed file cannot hold."""
    bare = parse(Named("page", "synth", (), "tritonft synth --stack prod --out plan --quiet"))
    with pytest.raises(UserError, match="hfToken"):
        settings_from_stack_file(ROOT, bare.stack, tuple(bare.assume_secret))


KNOWN_KEYS = (
    {k.key for k in STACK_KNOBS}
    | {k.key for k in MODEL_KNOBS}
    | set(VLLM_FIELDS)
    | set(ARCHITECTURE_FIELDS)
    | {choice for k in (*STACK_KNOBS, *MODEL_KNOBS) for choice in k.choices}
)
"""The settings' names: stack keys, model-entry keys, the keys of a model's ``vllm`` and ``architecture`` blocks, and
the values a key may take (``ingressAuth: apiKey``)."""

OUTPUT_NAMES = set(re.findall(r'(?:pulumi\.export\(\s*|^\s*)"(\w+)"', (ROOT / "__main__.py").read_text(), re.M))
"""The stack outputs and their fields (``probe.<model>.sampleAnswer``), as the program exports them."""

OTHER_SYSTEMS = {
    "Kubernetes API fields": (
        "activeDeadlineSeconds allowVolumeExpansion backoffLimit clusterIP externalTrafficPolicy imagePullSecrets "
        "maxUnavailable minAvailable preStop preemptionPolicy progressDeadlineSeconds startedAt subPath "
        "terminationGracePeriodSeconds topologySpreadConstraints ttlSecondsAfterFinished unhealthyPodEvictionPolicy"
    ),
    "Gateway API and Envoy Gateway fields": (
        "backendRefs apiKeyAuth basicAuth extAuth requestTimeout requestBuffer connectionLimit mergeType extensionApis "
        "enableLua calculateMaxHeapSizeBytes"
    ),
    "Pulumi resource options, provider and policy-pack terms": (
        "customTimeouts dependsOn ignoreChanges replaceOnChanges forceNew skipAwait hashBuildContext policyPackConfigs"
    ),
    "EKS, its add-ons and the charts' values": (
        "authenticationMode releaseVersion enableNetworkPolicy appVersion domainFilters txtOwnerId useExistingSecret"
    ),
    "the gateway's access log, JSON Schema, CUDA": "apiClient oneOf cudaMalloc",
}
"""camelCase names a page writes that are another system's, not a stack key (a new one goes here, with its kind)."""
OTHER_NAMES = {name for names in OTHER_SYSTEMS.values() for name in names.split()}
NAME = re.compile(r"^([a-z][a-z0-9]*[A-Z][A-Za-z0-9]*)(?:(?::\s|=).*)?$")
"""An inline code span that names a key: ``gpuType`` or ``gpuType: L4``."""
PREFIXED = re.compile(r"triton-ft:(\w+)")


def named_keys(text: str) -> list[tuple[int, str]]:
    """(line, name) of every ``triton-ft:<key>`` and every inline span naming a camelCase key, ``key: value`` too."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        found += [(number, m.group(1)) for m in PREFIXED.finditer(line)]
        found += [(number, m.group(1)) for span in INLINE.finditer(line) if (m := NAME.match(span.group(1)))]
    return found


HISTORY = ROOT / "docs" / "changelog.md"
"""The one page that names what the code no longer has, on purpose: what was removed."""


def test_every_stack_key_the_docs_name_is_in_the_settings_schema() -> None:
    unknown = [
        f"{page.relative_to(ROOT)}:{number}: `{name}`"
        for page in PAGES
        if page != HISTORY
        for number, name in named_keys(page.read_text(encoding="utf-8"))
        if name not in KNOWN_KEYS | OUTPUT_NAMES | OTHER_NAMES
    ]
    assert not unknown, "names neither a stack key, a stack output nor another system's (OTHER_SYSTEMS):\n" + "\n".join(
        unknown
    )


def test_the_key_check_finds_a_removed_key_and_spares_values_outputs_and_other_systems() -> None:
    page = (
        "Set `basicAuthSecretName` and `ingressAuth: apiKey`, read `openaiBaseUrl` and `sampleAnswer`,\n"
        "mind `terminationGracePeriodSeconds`; `triton-ft:gpuTyp: L4` and `maxPending: 4` are typos.\n"
    )
    assert [name for _, name in named_keys(page) if name not in KNOWN_KEYS | OUTPUT_NAMES | OTHER_NAMES] == [
        "gpuTyp",
        "maxPending",
    ]


def test_every_stack_key_the_workflows_and_their_scripts_set_is_in_the_settings_schema() -> None:
    """What CI writes into a stack (``pulumi config set ... triton-ft:<key>``) is read by the settings, which refuse
    an unknown key: a key the schema lost would stop that workflow's stack at its first synth."""
    stack_keys = {k.key for k in STACK_KNOBS}
    delivery = [p for p in sorted((ROOT / ".github").rglob("*")) if p.suffix in (".yml", ".yaml", ".sh", ".py")]
    set_keys = [(p, m.group(1)) for p in delivery for m in PREFIXED.finditer(p.read_text(encoding="utf-8"))]
    assert {key for _, key in set_keys} >= {"environment", "namespace", "ingressHost", "hfToken"}
    unknown = [f"{p.relative_to(ROOT)}: triton-ft:{key}" for p, key in set_keys if key not in stack_keys]
    assert not unknown, "keys the settings do not have:\n" + "\n".join(unknown)
