"""What the rendered repository needs from a converted FT checkpoint's ``config.ini`` (ft-format.md §2.3, §3.3, §4.3).

Parsed with ``configparser`` (independent of the converter's code). Only the keys that matter here are read:
the file dtype, the informational ``tensor_para_size`` (GPT only), head count and the special token ids.
"""

from __future__ import annotations

import configparser
import re
from dataclasses import dataclass
from pathlib import Path

from tritonft.spec import Family, ModelSpec

CONFIG_INI = "config.ini"
RANK_FILE = re.compile(r"\.(\d+)\.bin$")
GPU_DIR = re.compile(r"^(\d+)-gpu$")

FAMILY_SECTIONS: dict[Family, tuple[str, ...]] = {
    Family.T5: ("encoder", "decoder"),
    Family.GPT2: ("gpt",),
    Family.GPTJ: ("gptj",),
}
"""Sections FT reads per family; the weight dtype must be declared in each."""

DEFAULT_TOKEN_IDS: dict[Family, tuple[int, int, int]] = {
    Family.T5: (0, 1, 0),
    Family.GPT2: (50256, 50256, 50256),
    Family.GPTJ: (50256, 50256, 50256),
}
"""(start, end, pad) ids used when no config.ini is available: T5's decoder start/``</s>``/``<pad>`` and GPT-2's
``<|endoftext|>`` (GPT-J shares GPT-2's vocabulary)."""


@dataclass(frozen=True)
class TokenIds:
    start_id: int
    end_id: int
    pad_id: int


@dataclass(frozen=True)
class CheckpointIni:
    """The parsed ``config.ini``."""

    parser: configparser.ConfigParser

    @classmethod
    def parse(cls, text: str, source: str = CONFIG_INI) -> CheckpointIni:
        """Parse ``config.ini`` text; ``ValueError`` names the source when it is not INI."""
        parser = configparser.ConfigParser(interpolation=None, strict=False)
        try:
            parser.read_string(text, source=source)
        except configparser.Error as exc:
            raise ValueError(f"{source}: not a valid config.ini ({exc})") from exc
        return cls(parser)

    def get(self, section: str, key: str) -> str | None:
        if not self.parser.has_section(section):
            return None
        value = self.parser.get(section, key, fallback=None)
        return value.strip() if value is not None else None

    def get_int(self, section: str, key: str) -> int | None:
        value = self.get(section, key)
        if value is None:
            return None
        try:
            return int(value)
        except ValueError:
            return None

    def family(self) -> Family | None:
        """The family whose sections this file has."""
        for family, sections in FAMILY_SECTIONS.items():
            if all(self.parser.has_section(section) for section in sections):
                return family
        return None

    def token_ids(self, family: Family) -> TokenIds:
        """Start/end/pad ids FT will use; family defaults where a key is missing or ``None``."""
        start, end, pad = DEFAULT_TOKEN_IDS[family]
        if family is Family.T5:
            end = _first(self.get_int("decoder", "eos_token_id"), end)
            pad = _first(self.get_int("decoder", "pad_token_id"), pad)
            start = _first(self.get_int("decoder", "decoder_start_token_id"), pad)
            return TokenIds(start, end, pad)
        section = FAMILY_SECTIONS[family][0]
        start = _first(self.get_int(section, "start_id"), start)
        end = _first(self.get_int(section, "end_id"), end)
        return TokenIds(start, end, end)

    def head_count(self, family: Family) -> int | None:
        if family is Family.T5:
            return self.get_int("encoder", "num_heads")
        return self.get_int(FAMILY_SECTIONS[family][0], "head_num")


def _first(value: int | None, default: int) -> int:
    return default if value is None else value


def default_token_ids(family: Family) -> TokenIds:
    return TokenIds(*DEFAULT_TOKEN_IDS[family])


def ini_problems(spec: ModelSpec, ini: CheckpointIni, source: str = CONFIG_INI) -> list[str]:
    """Every disagreement between the spec and the checkpoint's ``config.ini`` (family, TP, weight dtype)."""
    family = ini.family()
    if family is not spec.family:
        found = f"a {family} checkpoint" if family else f"none of the sections {sorted(ini.parser.sections())}"
        wanted = ", ".join(f"[{s}]" for s in FAMILY_SECTIONS[spec.family])
        return [f"{source}: expected {wanted} for family {spec.family}, found {found}"]
    problems: list[str] = []
    for section in FAMILY_SECTIONS[spec.family]:
        dtype = ini.get(section, "weight_data_type")
        if dtype is None:
            problems.append(f"{source}: [{section}] has no weight_data_type (FT aborts at load)")
        elif dtype != str(spec.weight_dtype):
            problems.append(
                f"{source}: [{section}] weight_data_type = {dtype} but the model spec says "
                f"weight_dtype={spec.weight_dtype}; reconvert or fix the spec"
            )
    tp = ini.get_int(FAMILY_SECTIONS[spec.family][0], "tensor_para_size")
    if tp is not None and tp != spec.tensor_parallel:
        problems.append(
            f"{source}: tensor_para_size = {tp} but the model spec says tensor_parallel={spec.tensor_parallel}; "
            "reconvert for this TP size"
        )
    heads = ini.head_count(spec.family)
    if heads is not None and heads % spec.tensor_parallel:
        problems.append(
            f"{source}: {heads} attention heads are not divisible by tensor_parallel={spec.tensor_parallel}"
        )
    return problems


def checkpoint_dir_problems(directory: Path, tensor_parallel: int) -> list[str]:
    """TP evidence in a ``<N>-gpu`` directory itself: its name and the highest ``.<rank>.bin`` suffix."""
    problems: list[str] = []
    match = GPU_DIR.match(directory.name)
    if match and int(match.group(1)) != tensor_parallel:
        problems.append(f"{directory}: directory is for TP={match.group(1)} but tensor_para_size is {tensor_parallel}")
    ranks = {int(m.group(1)) for path in directory.glob("*.bin") if (m := RANK_FILE.search(path.name))}
    if ranks and max(ranks) + 1 != tensor_parallel:
        problems.append(
            f"{directory}: weight files are split for TP={max(ranks) + 1} (ranks 0..{max(ranks)}) but "
            f"tensor_para_size is {tensor_parallel}"
        )
    return problems


def find_config_ini(checkpoint: Path, spec: ModelSpec) -> Path | None:
    """``config.ini`` of the spec's TP in ``checkpoint`` (the ``<N>-gpu`` dir itself or its parent), if any."""
    for candidate in (checkpoint / spec.checkpoint_dir / CONFIG_INI, checkpoint / CONFIG_INI):
        if candidate.is_file():
            return candidate
    return None


def other_tp_dirs(checkpoint: Path) -> list[str]:
    """``<N>-gpu`` directories present in ``checkpoint`` (to explain a TP mismatch)."""
    if not checkpoint.is_dir():
        return []
    return sorted(p.name for p in checkpoint.iterdir() if p.is_dir() and GPU_DIR.match(p.name))
