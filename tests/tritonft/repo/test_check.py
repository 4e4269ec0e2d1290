"""The repository checker passes good repositories and names each kind of breakage."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from google.protobuf import text_format  # type: ignore[import-untyped]
from tritonclient.grpc import model_config_pb2 as mc

from tritonft.repo import check_repository, ft_checkpoint_path, write_repository
from tritonft.repo.naming import RepoNames
from tritonft.spec import Family, ModelSpec

from .conftest import config_ini, make_spec, write_checkpoint


def build_repo(tmp_path: Path, spec: ModelSpec, tokenizer_dir: Path) -> Path:
    """A complete repository as the conversion Job leaves it: weights in place, then ``write_repository``."""
    out = tmp_path / "repo"
    version_dir = out / RepoNames.of(spec).ft / "1"
    write_checkpoint(version_dir, spec)
    write_repository(spec, out, version_dir, tokenizer_dir=tokenizer_dir)
    return out


def edit(path: Path, change: Callable[[mc.ModelConfig], None]) -> None:
    config = mc.ModelConfig()
    text_format.Parse(path.read_text(), config)
    change(config)
    path.write_text(text_format.MessageToString(config))


@pytest.fixture
def repo(tmp_path: Path, family: Family, tokenizer_dir_for: Callable[[Family], Path]) -> tuple[Path, ModelSpec]:
    spec = make_spec(family, tensor_parallel=2)
    return build_repo(tmp_path, spec, tokenizer_dir_for(family)), spec


@pytest.mark.parametrize("decoupled", [False, True], ids=["unary", "streaming"])
@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_good_repositories_pass(
    tmp_path: Path, family: Family, tp: int, decoupled: bool, tokenizer_dir_for: Callable[[Family], Path]
) -> None:
    spec = make_spec(family, tensor_parallel=tp, decoupled=decoupled)
    assert check_repository(build_repo(tmp_path, spec, tokenizer_dir_for(family)), require_checkpoint=True) == []


def test_rendered_repository_without_weights_passes_unless_weights_are_required(tmp_path: Path, family: Family) -> None:
    write_repository(make_spec(family), tmp_path)
    assert check_repository(tmp_path) == []
    problems = check_repository(tmp_path, require_checkpoint=True)
    assert any("no config.ini" in p for p in problems)
    assert any("no tokenizer files" in p for p in problems)


def test_name_differing_from_directory_is_reported(repo: tuple[Path, ModelSpec]) -> None:
    root, spec = repo
    names = RepoNames.of(spec)
    edit(root / names.preprocessing / "config.pbtxt", lambda c: setattr(c, "name", "other"))
    assert check_repository(root) == [
        f"{names.preprocessing}/config.pbtxt: name 'other' differs from its directory '{names.preprocessing}'"
    ]


def test_dtype_mismatch_between_producer_and_consumer_is_reported(repo: tuple[Path, ModelSpec]) -> None:
    root, spec = repo
    names = RepoNames.of(spec)

    def to_fp32(config: mc.ModelConfig) -> None:
        next(i for i in config.input if i.name == "output_ids").data_type = mc.TYPE_FP32

    edit(root / names.postprocessing / "config.pbtxt", to_fp32)
    problems = check_repository(root)
    assert len(problems) == 1
    assert "output_ids <- '_output_ids': dtype" in problems[0]
    assert "but the model expects TYPE_FP32" in problems[0]


def test_dims_mismatch_is_reported(repo: tuple[Path, ModelSpec]) -> None:
    root, spec = repo
    names = RepoNames.of(spec)

    def three_dims(config: mc.ModelConfig) -> None:
        output = next(o for o in config.output if o.name == "bad_words_list")
        del output.dims[:]
        output.dims.extend([3, -1])

    edit(root / names.preprocessing / "config.pbtxt", three_dims)
    problems = check_repository(root)
    assert len(problems) == 1
    assert "bad_words_list <- '_bad_words_list': dims [3, -1]" in problems[0]


def test_missing_ensemble_version_directory_is_reported(repo: tuple[Path, ModelSpec]) -> None:
    root, spec = repo
    shutil.rmtree(root / spec.name / "1")
    assert check_repository(root) == [f"{spec.name}: no version directory (e.g. {spec.name}/1/)"]


def test_config_ini_tp_disagreeing_with_pbtxt_is_reported(repo: tuple[Path, ModelSpec]) -> None:
    root, spec = repo
    ini = Path(ft_checkpoint_path(spec, str(root))) / "config.ini"
    if spec.family is Family.GPT2:
        ini.write_text(config_ini(spec, tp=4))
        expected = "tensor_para_size = 4 but the model spec says tensor_parallel=2"
    else:  # T5 and GPT-J record no TP in config.ini: the rank files give it away
        for path in ini.parent.glob("*.1.bin"):
            path.unlink()
        expected = "weight files are split for TP=1 (ranks 0..0) but tensor_para_size is 2"
    problems = check_repository(root)
    assert len(problems) == 1 and expected in problems[0]


def test_config_ini_weight_dtype_disagreeing_with_spec_is_reported(repo: tuple[Path, ModelSpec]) -> None:
    root, spec = repo
    ini = Path(ft_checkpoint_path(spec, str(root))) / "config.ini"
    ini.write_text(config_ini(spec, weight_dtype="fp16"))
    problems = check_repository(root)
    sections = 2 if spec.family is Family.T5 else 1
    assert len(problems) == sections
    assert all("weight_data_type = fp16 but the model spec says weight_dtype=fp32" in p for p in problems)


def test_checkpoint_of_another_family_is_reported(tmp_path: Path, tokenizer_dir_for: Callable[[Family], Path]) -> None:
    spec = make_spec(Family.GPTJ)
    root = build_repo(tmp_path, spec, tokenizer_dir_for(Family.GPTJ))
    ini = Path(ft_checkpoint_path(spec, str(root))) / "config.ini"
    ini.write_text(config_ini(make_spec(Family.GPT2)))
    problems = check_repository(root)
    assert len(problems) == 1 and "expected [gptj] for family gptj, found a gpt2 checkpoint" in problems[0]


def test_step_naming_an_absent_model_is_reported(repo: tuple[Path, ModelSpec]) -> None:
    root, spec = repo
    shutil.rmtree(root / RepoNames.of(spec).postprocessing)
    problems = check_repository(root)
    assert any(f"no model named '{RepoNames.of(spec).postprocessing}'" in p for p in problems)
    assert any("ensemble output 'text_output' is not produced by any step" in p for p in problems)


def test_unfed_required_input_is_reported(repo: tuple[Path, ModelSpec]) -> None:
    root, spec = repo

    def drop_ids(config: mc.ModelConfig) -> None:
        del config.ensemble_scheduling.step[1].input_map["input_ids"]

    edit(root / spec.name / "config.pbtxt", drop_ids)
    assert check_repository(root) == [
        f"{spec.name}/config.pbtxt: step 1 ({RepoNames.of(spec).ft}) leaves required input 'input_ids' unfed"
    ]


def test_mixing_decoupled_and_unary_sources_in_one_step_is_reported(
    tmp_path: Path, tokenizer_dir_for: Callable[[Family], Path]
) -> None:
    spec = make_spec(Family.GPT2, decoupled=True)
    root = build_repo(tmp_path, spec, tokenizer_dir_for(Family.GPT2))

    def feed_prompt_lengths(config: mc.ModelConfig) -> None:
        config.ensemble_scheduling.step[2].input_map["input_lengths"] = "input_lengths"

    edit(root / spec.name / "config.pbtxt", feed_prompt_lengths)
    problems = check_repository(root)
    assert len(problems) == 1 and "receives inputs originating from different decoupled models" in problems[0]


def test_ragged_input_without_batch_input_is_reported(repo: tuple[Path, ModelSpec]) -> None:
    root, spec = repo
    ft = root / RepoNames.of(spec).ft / "config.pbtxt"

    def ragged_without_shape(config: mc.ModelConfig) -> None:
        config.input[0].allow_ragged_batch = True
        del config.batch_input[:]

    edit(ft, ragged_without_shape)
    assert check_repository(root) == [
        f"{RepoNames.of(spec).ft}/config.pbtxt: ragged input 'input_ids' needs a batch_input BATCH_ITEM_SHAPE "
        "TYPE_INT32 target input_ids_item_shape"
    ]


def test_gpu_instance_group_and_sequence_batching_break_backend_rules(repo: tuple[Path, ModelSpec]) -> None:
    root, spec = repo

    def break_rules(config: mc.ModelConfig) -> None:
        config.instance_group[0].kind = mc.ModelInstanceGroup.KIND_GPU
        config.sequence_batching.SetInParent()

    edit(root / RepoNames.of(spec).ft / "config.pbtxt", break_rules)
    label = f"{RepoNames.of(spec).ft}/config.pbtxt"
    assert check_repository(root) == [
        f"{label}: needs exactly one instance_group of kind KIND_CPU (the backend places GPUs)",
        f"{label}: sequence_batching needs max_batch_size 1",
    ]


def test_unknown_field_fails_to_parse(repo: tuple[Path, ModelSpec]) -> None:
    root, spec = repo
    path = root / spec.name / "config.pbtxt"
    path.write_text(path.read_text() + "\nmax_batch: 4\n")
    problems = check_repository(root)
    assert len(problems) == 1 and "does not parse as a Triton ModelConfig" in problems[0] and "max_batch" in problems[0]
