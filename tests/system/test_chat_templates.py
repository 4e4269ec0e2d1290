"""Which chat template a checkpoint gives chat, wherever it keeps it: the gateway's choice
(:func:`tritonft.engines.vllm.chat.read_tokenizer_config` then :func:`~tritonft.engines.vllm.chat.template_of`)
against transformers' own (``AutoTokenizer.from_pretrained(...).get_chat_template()``, run in the vLLM engine's
environment, whose transformers is the one vLLM serves with)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.tritonft.engines.vllm.checkpoints import BOS, EOS, train_tokenizer
from tritonft import vllm_env
from tritonft.engines.vllm.chat import (
    CHAT_TEMPLATE_DIR,
    CHAT_TEMPLATE_FILE,
    ChatTemplateError,
    read_tokenizer_config,
    template_of,
)

IN_CONFIG, IN_FILE, NAMED_DEFAULT, TOOL_USE = (f"{{{{ '{name}' }}}}" for name in ("config", "file", "named", "tools"))
"""Four templates that say which one was used."""


def config_only(d: Path) -> None:
    write_config(d, IN_CONFIG)


def file_over_config(d: Path) -> None:
    write_config(d, IN_CONFIG)
    (d / CHAT_TEMPLATE_FILE).write_text(IN_FILE)


def file_without_config_entry(d: Path) -> None:
    write_config(d, None)
    (d / CHAT_TEMPLATE_FILE).write_text(IN_FILE)


def named_list_in_config(d: Path) -> None:
    write_config(d, [{"name": "tool_use", "template": TOOL_USE}, {"name": "default", "template": IN_CONFIG}])


def file_and_named_templates(d: Path) -> None:
    write_config(d, IN_CONFIG)
    (d / CHAT_TEMPLATE_FILE).write_text(IN_FILE)
    (d / CHAT_TEMPLATE_DIR).mkdir()
    (d / CHAT_TEMPLATE_DIR / "tool_use.jinja").write_text(TOOL_USE)


def named_default_over_file(d: Path) -> None:
    file_and_named_templates(d)
    (d / CHAT_TEMPLATE_DIR / "default.jinja").write_text(NAMED_DEFAULT)


def only_named_templates_hide_the_config(d: Path) -> None:
    write_config(d, IN_CONFIG)
    (d / CHAT_TEMPLATE_DIR).mkdir()
    (d / CHAT_TEMPLATE_DIR / "tool_use.jinja").write_text(TOOL_USE)


def write_config(d: Path, template: object) -> None:
    config: dict[str, object] = {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": BOS, "eos_token": EOS}
    if template is not None:
        config["chat_template"] = template
    (d / "tokenizer_config.json").write_text(json.dumps(config))


LAYOUTS: dict[str, tuple[Callable[[Path], None], str | None]] = {
    "config-only": (config_only, IN_CONFIG),
    "file-over-config": (file_over_config, IN_FILE),
    "file-without-config-entry": (file_without_config_entry, IN_FILE),
    "named-list-in-config": (named_list_in_config, IN_CONFIG),
    "file-and-named-templates": (file_and_named_templates, IN_FILE),
    "named-default-over-file": (named_default_over_file, NAMED_DEFAULT),
    "only-named-templates-hide-the-config": (only_named_templates_hide_the_config, None),
}
"""Each layout and the template chat uses (None: none; transformers refuses "multiple chat templates with no
default")."""

TRANSFORMERS_CHOICE = """
import json, sys
from transformers import AutoTokenizer
out = {}
for directory in sys.argv[1:]:
    try:
        out[directory] = AutoTokenizer.from_pretrained(directory).get_chat_template()
    except ValueError:
        out[directory] = None
print(json.dumps(out))
"""


def ours(directory: Path) -> str | None:
    try:
        return template_of(read_tokenizer_config(directory))
    except ChatTemplateError:
        return None


@pytest.fixture(scope="module")
def layouts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tokenizer = tmp_path_factory.mktemp("tokenizer")
    train_tokenizer(tokenizer)
    made = {}
    for name, (build, _) in LAYOUTS.items():
        directory = tmp_path_factory.mktemp(name)
        (directory / "tokenizer.json").write_bytes((tokenizer / "tokenizer.json").read_bytes())
        build(directory)
        made[name] = directory
    return made


@pytest.fixture(scope="module")
def transformers_choices(layouts: dict[str, Path]) -> dict[str, str | None]:
    python = vllm_env.ensure_environment() / "bin" / "python"
    ran = subprocess.run(
        [str(python), "-c", TRANSFORMERS_CHOICE, *(str(d) for d in layouts.values())],
        capture_output=True,
        text=True,
        timeout=600,
        env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"},
        check=True,
    )
    by_path: dict[str, str | None] = json.loads(ran.stdout.strip().splitlines()[-1])
    return {name: by_path[str(d)] for name, d in layouts.items()}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_chat_uses_the_template_transformers_uses(
    layout: str, layouts: dict[str, Path], transformers_choices: dict[str, str | None]
) -> None:
    expected = LAYOUTS[layout][1]
    assert transformers_choices[layout] == expected
    assert ours(layouts[layout]) == expected
