"""Every rendered config.pbtxt parses with Triton's schema and carries what the spec says."""

from __future__ import annotations

from dataclasses import replace

import pytest
from google.protobuf import text_format  # type: ignore[import-untyped]
from tritonclient.grpc import model_config_pb2 as mc

from tritonft.errors import UserError
from tritonft.repo import RepoNames, render_repository_files
from tritonft.spec import Batching, DataType, Family

from .conftest import config_ini, make_spec


def parse(content: bytes) -> mc.ModelConfig:
    config = mc.ModelConfig()
    text_format.Parse(content.decode("utf-8"), config)  # raises on any unknown field
    return config


def configs(files: dict[str, bytes]) -> dict[str, mc.ModelConfig]:
    return {path: parse(content) for path, content in files.items() if path.endswith("config.pbtxt")}


@pytest.mark.parametrize("decoupled", [False, True], ids=["unary", "streaming"])
@pytest.mark.parametrize("data_type", list(DataType), ids=str)
@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_every_config_parses_into_model_config(family: Family, tp: int, data_type: DataType, decoupled: bool) -> None:
    spec = make_spec(family, tensor_parallel=tp, data_type=data_type, decoupled=decoupled)
    parsed = configs(render_repository_files(spec))
    names = RepoNames.of(spec)
    assert sorted(parsed) == sorted(
        f"{n}/config.pbtxt" for n in (names.ensemble, names.ft, names.preprocessing, names.postprocessing)
    )
    ft = parsed[f"{names.ft}/config.pbtxt"]
    params = {key: value.string_value for key, value in ft.parameters.items()}
    assert params["tensor_para_size"] == str(tp)
    assert params["data_type"] == str(data_type)
    assert params["model_checkpoint_path"] == f"/models/{names.ft}/1/{tp}-gpu"
    assert ft.model_transaction_policy.decoupled is decoupled


def test_ft_parameters_are_all_strings(family: Family) -> None:
    ft = configs(render_repository_files(make_spec(family)))[f"{RepoNames.of(make_spec(family)).ft}/config.pbtxt"]
    assert all(value.string_value for value in ft.parameters.values())
    expected = {
        "model_type",
        "tensor_para_size",
        "pipeline_para_size",
        "data_type",
        "model_checkpoint_path",
        "enable_custom_all_reduce",
    } | ({"int8_mode"} if family is Family.GPT2 else set())
    assert set(ft.parameters) == expected
    assert ft.parameters["model_type"].string_value == family.ft_model_type
    assert ft.backend == "fastertransformer"


def test_ft_model_has_exactly_one_cpu_instance_group_with_the_spec_count(family: Family) -> None:
    spec = make_spec(family, instances=3)
    ft = configs(render_repository_files(spec))[f"{RepoNames.of(spec).ft}/config.pbtxt"]
    assert [(g.kind, g.count) for g in ft.instance_group] == [(mc.ModelInstanceGroup.KIND_CPU, 3)]


def test_dynamic_batching_takes_queue_delay_and_sorted_preferred_sizes(family: Family) -> None:
    spec = make_spec(
        family, batching=Batching(max_batch_size=32, max_queue_delay_us=750, preferred_batch_sizes=(16, 8))
    )
    ft = configs(render_repository_files(spec))[f"{RepoNames.of(spec).ft}/config.pbtxt"]
    assert ft.max_batch_size == 32
    assert ft.dynamic_batching.max_queue_delay_microseconds == 750
    assert list(ft.dynamic_batching.preferred_batch_size) == [8, 16]
    assert not ft.HasField("sequence_batching")


def test_every_family_declares_ragged_input_ids_with_item_shape_batch_input(family: Family) -> None:
    spec = make_spec(family)
    ft = configs(render_repository_files(spec))[f"{RepoNames.of(spec).ft}/config.pbtxt"]
    ragged = [i.name for i in ft.input if i.allow_ragged_batch]
    shapes = [(b.kind, list(b.target_name), b.data_type, list(b.source_input)) for b in ft.batch_input]
    assert ragged == ["input_ids"]
    assert shapes == [(mc.BatchInput.BATCH_ITEM_SHAPE, ["input_ids_item_shape"], mc.TYPE_INT32, ["input_ids"])]


def test_int8_mode_is_rendered_for_gpt2() -> None:
    spec = make_spec(Family.GPT2, int8_mode=1)
    ft = configs(render_repository_files(spec))[f"{RepoNames.of(spec).ft}/config.pbtxt"]
    assert ft.parameters["int8_mode"].string_value == "1"


@pytest.mark.parametrize("family_", [Family.T5, Family.GPTJ], ids=str)
def test_int8_mode_is_refused_outside_gpt2(family_: Family) -> None:
    with pytest.raises(UserError, match="int8_mode: 1 is only supported for family gpt2"):
        render_repository_files(make_spec(family_, int8_mode=1))


def test_bad_spec_lists_every_problem_at_once() -> None:
    spec = make_spec(
        Family.GPT2,
        name="bad name",
        tensor_parallel=5,
        instances=0,
        batching=Batching(max_batch_size=4, max_queue_delay_us=-1, preferred_batch_sizes=(8,)),
    )
    with pytest.raises(UserError) as caught:
        render_repository_files(spec)
    assert len(caught.value.problems) == 5
    text = str(caught.value)
    for fragment in (
        "name: 'bad name'",
        "tensor_parallel: 5 does not divide num_heads=16",
        "instances: 0",
        "max_queue_delay_us: -1",
        "preferred_batch_sizes: 8 is outside 1..max_batch_size=4",
    ):
        assert fragment in text


def test_rendering_is_deterministic(family: Family) -> None:
    spec = make_spec(family)
    assert render_repository_files(spec) == render_repository_files(spec)


def test_model_root_sets_the_absolute_checkpoint_path() -> None:
    spec = make_spec(Family.GPTJ, tensor_parallel=4)
    ft = configs(render_repository_files(spec, model_root="/mnt/store/"))["gpt-j-6b-ft/config.pbtxt"]
    assert ft.parameters["model_checkpoint_path"].string_value == "/mnt/store/gpt-j-6b-ft/1/4-gpu"


def test_relative_model_root_is_refused() -> None:
    with pytest.raises(UserError, match="model_root: 'models' must be the absolute path"):
        render_repository_files(make_spec(Family.T5), model_root="models")


def test_token_ids_come_from_config_ini() -> None:
    spec = make_spec(Family.GPT2)
    files = render_repository_files(spec, checkpoint_ini=config_ini(spec, end_id=7))
    pre = parse(files["gpt2-medium-preprocessing/config.pbtxt"])
    assert pre.parameters["end_id"].string_value == "7"
    assert pre.parameters["pad_id"].string_value == "7"


def test_t5_tokenizer_models_pad_with_pad_id_and_append_end_id() -> None:
    pre = parse(render_repository_files(make_spec(Family.T5))["t5-small-preprocessing/config.pbtxt"])
    params = {k: v.string_value for k, v in pre.parameters.items()}
    assert params == {"pad_id": "0", "end_id": "1", "append_id": "1", "max_input_len": "64", "default_output_len": "32"}


def test_config_ini_disagreeing_with_spec_refuses_to_render() -> None:
    spec = make_spec(Family.GPT2, tensor_parallel=2)
    with pytest.raises(UserError) as caught:
        render_repository_files(spec, checkpoint_ini=config_ini(spec, tp=4, weight_dtype="fp16"))
    assert any("weight_data_type = fp16" in p for p in caught.value.problems)
    assert any("tensor_para_size = 4" in p for p in caught.value.problems)


def test_postprocessing_inputs_take_the_ft_output_dtypes(family: Family) -> None:
    spec = make_spec(family)
    parsed = configs(render_repository_files(spec))
    names = RepoNames.of(spec)
    ft_out = {o.name: o.data_type for o in parsed[f"{names.ft}/config.pbtxt"].output}
    post_in = {i.name: i.data_type for i in parsed[f"{names.postprocessing}/config.pbtxt"].input}
    assert post_in["output_ids"] == ft_out["output_ids"]
    assert post_in["sequence_length"] == ft_out["sequence_length"]


def test_streaming_gpt_ensemble_feeds_postprocessing_only_from_the_ft_model() -> None:
    spec = replace(make_spec(Family.GPT2), decoupled=True)
    ensemble = configs(render_repository_files(spec))["gpt2-medium/config.pbtxt"]
    post = ensemble.ensemble_scheduling.step[2]
    assert post.model_name == "gpt2-medium-postprocessing"
    assert sorted(post.input_map) == ["output_ids", "sequence_length"]


def test_the_ft_step_and_the_detokenizer_have_a_warmup_sample_and_the_tokenizer_model_none(family: Family) -> None:
    spec = make_spec(family)
    names = RepoNames.of(spec)
    rendered = configs(render_repository_files(spec))
    warmed = {
        name
        for name in (names.ft, names.preprocessing, names.postprocessing)
        if rendered[f"{name}/config.pbtxt"].model_warmup
    }
    assert warmed == {names.ft, names.postprocessing}


def test_a_warmup_sample_feeds_every_required_input_from_a_file_shipped_with_the_model(family: Family) -> None:
    spec = make_spec(family)
    files = render_repository_files(spec)
    ft_name = RepoNames.of(spec).ft
    ft = configs(files)[f"{ft_name}/config.pbtxt"]
    (sample,) = ft.model_warmup
    required = {i.name for i in ft.input if not i.optional}
    assert set(sample.inputs) == required
    for name, tensor in sample.inputs.items():
        assert tensor.input_data_file == name
        assert len(files[f"{ft_name}/warmup/{name}"]) == 4  # one UINT32
