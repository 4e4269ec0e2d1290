"""Names and paths inside a rendered Triton model repository (one place, so renderer, checker and Jobs agree).

For a model spec named ``NAME`` the repository holds four Triton models::

    NAME/                    the text-in/text-out ensemble (what clients call)
    NAME-ft/                 the raw FasterTransformer model (token ids in/out; stays callable)
    NAME-ft/1/<TP>-gpu/      the converted weights + config.ini (written by the converter, never by tritonft.repo)
    NAME-preprocessing/      Python backend: text -> token ids
    NAME-postprocessing/     Python backend: token ids -> text
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tritonft.spec import ModelSpec

VERSION = "1"
"""The single model version tritonft renders."""

SPEC_FILE = "tritonft-spec.json"
"""Provenance file in the FT model directory (Triton ignores it): the ``ModelSpec`` the repository was rendered
from, so the checker can compare TP and weight dtype with the checkpoint's ``config.ini``."""

TOKENIZATION_MODULE = "tritonft_tokenization.py"
"""File name of the copy of :mod:`tritonft.repo.tokenization` in each Python model's version directory."""

MODEL_NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


@dataclass(frozen=True)
class RepoNames:
    """Triton model names of one served model."""

    ensemble: str
    ft: str
    preprocessing: str
    postprocessing: str

    @classmethod
    def of(cls, spec: ModelSpec) -> RepoNames:
        return cls(
            ensemble=spec.name,
            ft=f"{spec.name}-ft",
            preprocessing=f"{spec.name}-preprocessing",
            postprocessing=f"{spec.name}-postprocessing",
        )

    def by_role(self) -> dict[str, str]:
        """Template role name (as written in ``model_repo/``) -> real model name."""
        return {
            "ensemble": self.ensemble,
            "fastertransformer": self.ft,
            "preprocessing": self.preprocessing,
            "postprocessing": self.postprocessing,
        }


def ft_checkpoint_path(spec: ModelSpec, model_root: str) -> str:
    """Where the FT backend loads the weights from: ``<root>/<NAME>-ft/1/<TP>-gpu`` (ft-format.md §1.2 layout).

    The conversion Job should write its ``<TP>-gpu`` directory exactly there (relative to the repository root).
    """
    return f"{model_root.rstrip('/')}/{RepoNames.of(spec).ft}/{VERSION}/{spec.checkpoint_dir}"
