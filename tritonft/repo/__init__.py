"""Triton model repository for one served model: FT model, tokenizer models and the text-in/text-out ensemble.

Entry points: :func:`render_repository_files` (pure), :func:`write_repository` (atomic, on disk) and
:func:`check_repository` (problems as strings). Layout and names: :mod:`tritonft.repo.naming`.
"""

from __future__ import annotations

from tritonft.repo.check import check_repository
from tritonft.repo.naming import RepoNames, ft_checkpoint_path
from tritonft.repo.render import render_repository_files, write_repository

__all__ = [
    "RepoNames",
    "check_repository",
    "ft_checkpoint_path",
    "render_repository_files",
    "write_repository",
]
