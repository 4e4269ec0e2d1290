"""Render a complete Triton model repository for one ``ModelSpec`` (pure) and write it atomically.

:func:`render_repository_files` returns ``{relative path: bytes}`` and touches no disk beyond reading the
templates; :func:`write_repository` adds the tokenizer files and swaps the result into place.

Tokenizer files copied into both Python models' version directories (the first set found, see
``tokenization.TOKENIZER_FILE_SETS``): ``tokenizer.json``, else ``spiece.model``, else ``vocab.json`` +
``merges.txt``. They are looked up in ``tokenizer_dir`` (default: the checkpoint directory).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from tritonft.engines.base import RenderedRepository
from tritonft.errors import UserError
from tritonft.repo import pbtxt, tokenization
from tritonft.repo.checkpoint import (
    CheckpointIni,
    default_token_ids,
    find_config_ini,
    ini_problems,
    other_tp_dirs,
)
from tritonft.repo.engine import Engine, reference_config, reference_files
from tritonft.repo.naming import SPEC_FILE, TOKENIZATION_MODULE, VERSION, RepoNames
from tritonft.repo.templates import template_bytes
from tritonft.repo.validate import spec_problems
from tritonft.spec import ModelSpec

ENSEMBLE_VERSION_MARKER = ".keep"
"""Empty file that keeps the ensemble's (otherwise empty) version directory in place; Triton needs the directory."""


def render_repository_files(
    spec: ModelSpec,
    checkpoint_ini: str | None = None,
    model_root: str = "/models",
    checkpoint_path: str | None = None,
    engine: Engine = Engine.FASTERTRANSFORMER,
    *,
    judge_reference: str | None = None,
) -> dict[str, bytes]:
    """Every file of the repository except weights and tokenizer files, keyed by path relative to its root.

    ``checkpoint_ini`` (the converted ``config.ini`` text) supplies the special token ids and is checked against
    the spec; without it the family defaults are used (T5: start 0, end 1, pad 0; GPT-2/GPT-J: 50256).
    ``model_root`` is where Triton sees the repository (``model_checkpoint_path`` is absolute).
    ``checkpoint_path`` overrides ``model_checkpoint_path`` for weights kept outside the repository (the cluster
    keeps them under their conversion key so a serving change re-renders without re-converting).
    ``engine``: what runs the model step (:mod:`tritonft.repo.engine`; the FT backend unless told otherwise).
    ``judge_reference``: the judge's reference of this revision (JSON, :mod:`tritonft.probe.judge_reference`), carried
    by the ensemble as its ``tritonft_judge_reference`` parameter so the judge reads it from the served model.
    Raises ``UserError`` listing every problem of the spec or disagreement with ``config.ini``.
    """
    problems = spec_problems(spec, model_root)
    if checkpoint_path is not None and (
        not checkpoint_path.startswith("/") or not checkpoint_path.rstrip("/").endswith(spec.checkpoint_dir)
    ):
        problems.append(
            f"checkpoint_path: {checkpoint_path!r} must be the absolute path of the {spec.checkpoint_dir} directory "
            "as Triton sees it"
        )
    ids = default_token_ids(spec.family)
    if checkpoint_ini is not None:
        try:
            ini = CheckpointIni.parse(checkpoint_ini)
        except ValueError as exc:
            raise UserError(str(exc)) from exc
        problems += ini_problems(spec, ini)
        if not problems:
            ids = ini.token_ids(spec.family)
    if problems:
        raise UserError(f"cannot render the Triton repository for model {spec.name!r}", problems)

    names = RepoNames.of(spec)
    ft = pbtxt.ft_config(spec, model_root, checkpoint_path)
    step = reference_config(ft) if engine is Engine.REFERENCE else ft
    preprocessing = pbtxt.preprocessing_config(spec, ids)
    postprocessing = pbtxt.postprocessing_config(spec, ids, ft)
    files: dict[str, bytes] = {
        f"{names.ft}/{SPEC_FILE}": spec.to_json().encode("utf-8") + b"\n",
        f"{names.ensemble}/config.pbtxt": pbtxt.render(pbtxt.ensemble_config(spec, judge_reference), spec.name),
        f"{names.ensemble}/{VERSION}/{ENSEMBLE_VERSION_MARKER}": b"",
    }
    # Warm-up samples for the models whose inputs are token ids (pbtxt.add_warmup: no text sample suits every
    # tokenizer, so the preprocessing model has none).
    for model, config in ((names.ft, step), (names.postprocessing, postprocessing)):
        for relative, content in pbtxt.add_warmup(config).items():
            files[f"{model}/{relative}"] = content
        files[f"{model}/config.pbtxt"] = pbtxt.render(config, spec.name)
    files[f"{names.preprocessing}/config.pbtxt"] = pbtxt.render(preprocessing, spec.name)
    tokenization_source = Path(tokenization.__file__).read_bytes()
    for model, role in ((names.preprocessing, "preprocessing"), (names.postprocessing, "postprocessing")):
        files[f"{model}/{VERSION}/model.py"] = template_bytes(f"shared/{role}/{VERSION}/model.py")
        files[f"{model}/{VERSION}/{TOKENIZATION_MODULE}"] = tokenization_source
    if engine is Engine.REFERENCE:
        files.update(reference_files(names.ft))
    return dict(sorted(files.items()))


def tokenizer_files(directory: Path) -> dict[str, bytes]:
    """The tokenizer files to ship from ``directory``; ``UserError`` naming the files looked for when none."""
    names = tokenization.find_tokenizer_files(directory)
    if names is None:
        wanted = " or ".join(" + ".join(group) for group in tokenization.TOKENIZER_FILE_SETS)
        raise UserError(
            f"no tokenizer files in {directory}: expected {wanted}; pass the Hugging Face download directory "
            "with --tokenizer"
        )
    return {name: (directory / name).read_bytes() for name in names}


def read_checkpoint_ini(spec: ModelSpec, checkpoint_dir: Path) -> tuple[Path | None, str | None]:
    """The checkpoint's ``config.ini`` (path, text) for the spec's TP; ``UserError`` when only other TPs exist."""
    if not checkpoint_dir.is_dir():
        raise UserError(f"checkpoint directory {checkpoint_dir} does not exist")
    path = find_config_ini(checkpoint_dir, spec)
    if path is None:
        others = other_tp_dirs(checkpoint_dir)
        if others:
            raise UserError(
                f"checkpoint {checkpoint_dir} holds {', '.join(others)} but the model spec says "
                f"tensor_parallel={spec.tensor_parallel} (expected {spec.checkpoint_dir}/); reconvert or fix the spec"
            )
        return None, None
    return path, path.read_text(encoding="utf-8")


def write_repository(
    spec: ModelSpec,
    out_dir: Path,
    checkpoint_dir: Path | None = None,
    *,
    tokenizer_dir: Path | None = None,
    model_root: str = "/models",
    checkpoint_path: str | None = None,
    engine: Engine = Engine.FASTERTRANSFORMER,
    judge_reference: Path | None = None,
) -> RenderedRepository:
    """Render and write the repository of ``spec`` into ``out_dir`` (a Triton repository root, maybe shared).

    ``checkpoint_dir`` is the converter's output (the directory holding ``<TP>-gpu/``, or that directory itself):
    its ``config.ini`` is checked against the spec and supplies token ids. Tokenizer files come from
    ``tokenizer_dir`` (default ``checkpoint_dir``). Weights are never copied: the converter writes them to
    ``<out>/<NAME>-ft/1/<TP>-gpu`` (see :func:`tritonft.repo.naming.ft_checkpoint_path`), and they survive
    a re-render.

    Atomic per model: each model directory is staged in a temporary directory inside ``out_dir`` and renamed into
    place (composing models first, the ensemble last); the FT model directory is updated file by file
    (``os.replace``) so existing weights stay put. On any error before the swap nothing in ``out_dir`` changes.
    """
    config_ini_path, config_ini = (None, None) if checkpoint_dir is None else read_checkpoint_ini(spec, checkpoint_dir)
    reference = judge_reference_text(judge_reference) if judge_reference is not None else None
    files = render_repository_files(spec, config_ini, model_root, checkpoint_path, engine, judge_reference=reference)
    names = RepoNames.of(spec)
    token_source = tokenizer_dir or checkpoint_dir
    shipped: dict[str, bytes] = {}
    if token_source is not None:
        shipped = tokenizer_files(token_source)
        for model in (names.preprocessing, names.postprocessing):
            for name, content in shipped.items():
                files[f"{model}/{VERSION}/{name}"] = content
    out_dir.mkdir(parents=True, exist_ok=True)
    order = (names.ft, names.preprocessing, names.postprocessing, names.ensemble)
    staging = Path(tempfile.mkdtemp(prefix=f".tritonft-{spec.name}-", dir=out_dir))
    try:
        _stage(staging, files)
        for model in order:
            if model == names.ft:
                _merge_into(staging / model, out_dir / model)
            else:
                _swap_directory(staging / model, out_dir / model)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return RenderedRepository(
        root=out_dir,
        models=order,
        files=tuple(sorted(files)),
        config_source=config_ini_path,
        tokenizer=tuple(shipped),
    )


def _stage(staging: Path, files: Mapping[str, bytes]) -> None:
    for relative, content in files.items():
        path = staging / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        os.chmod(path, 0o644)


def _swap_directory(new: Path, target: Path) -> None:
    """Replace ``target`` by ``new`` with two renames (the old tree is deleted afterwards)."""
    if not target.exists():
        new.rename(target)
        return
    trash = new.parent / f"{target.name}.old"
    target.rename(trash)
    new.rename(target)
    shutil.rmtree(trash)


def _merge_into(new: Path, target: Path) -> None:
    """Move every staged file of ``new`` into ``target`` with ``os.replace``, keeping other files (weights)."""
    if not target.exists():
        new.rename(target)
    else:
        for path in sorted(p for p in new.rglob("*") if p.is_file()):
            destination = target / path.relative_to(new)
            destination.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, destination)
    (target / VERSION).mkdir(exist_ok=True)


def judge_reference_text(path: Path) -> str:
    """The reference file's JSON, checked (``UserError`` naming the file when it is not a judge reference)."""
    from tritonft.probe.judge_reference import JudgeReference

    try:
        text = path.read_text(encoding="utf-8")
        JudgeReference.from_json(text)
    except (OSError, KeyError, TypeError, ValueError) as exc:
        raise UserError(f"--judge-reference {path}: not a judge reference ({exc}); run `tritonft reference`") from exc
    return text.strip()
