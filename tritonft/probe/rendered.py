"""The probe's expected contract, taken from the very ensemble the model's engine renders for a model spec, and the
probe's target for a spec.

So "metadata matches what we rendered" is checked against the rendered ``config.pbtxt`` itself, not a copy of it.
"""

from __future__ import annotations

from collections.abc import Sequence

from google.protobuf import text_format  # type: ignore[import-untyped]  # no types-protobuf in the lock
from tritonclient.grpc import model_config_pb2 as mc

from tritonft.engines import engine_for
from tritonft.probe.contract import CONFIG_TYPE_TO_V2, TensorSpec, TextContract
from tritonft.probe.encoder import EncoderTarget
from tritonft.probe.judge_reference import REFERENCE_STEPS, has_reference
from tritonft.probe.runner import ModelTarget
from tritonft.spec import EncoderTask, ModelSpec

TEXT_INPUT = "text_input"
TEXT_OUTPUT = "text_output"


def contract_for_spec(spec: ModelSpec) -> TextContract:
    """Every input and output the rendered ensemble of ``spec`` declares, with V2 datatypes (an encoder's
    ``text_output`` is its answer tensor: ``embedding`` or ``label``)."""
    files = engine_for(spec.family).repository_files(spec)
    config = text_format.Parse(files[f"{spec.name}/config.pbtxt"].decode(), mc.ModelConfig())

    def tensors(items: list[mc.ModelInput] | list[mc.ModelOutput]) -> tuple[TensorSpec, ...]:
        out = []
        for tensor in items:
            type_name = mc.DataType.Name(tensor.data_type)
            out.append(TensorSpec(tensor.name, CONFIG_TYPE_TO_V2.get(type_name, type_name)))
        return tuple(out)

    return TextContract(
        inputs=tensors(list(config.input)),
        outputs=tensors(list(config.output)),
        text_input=TEXT_INPUT,
        text_output=TEXT_OUTPUT if spec.encoder is None else encoder_target(spec).answer_tensor,
    )


def encoder_target(
    spec: ModelSpec,
    triples: Sequence[tuple[str, str, str]] = (),
    expected_labels: Sequence[tuple[str, str]] = (),
) -> EncoderTarget:
    """What the probe checks of the encoder ``spec``, with the stack's expected answers (similarity triples for an
    embedding model, (text, label) pairs for a classifier; none = the defaults of :class:`EncoderTarget`)."""
    if spec.encoder is None:
        raise ValueError(f"model {spec.name!r} ({spec.family}) is not an encoder")
    encoder = spec.encoder
    embed = encoder.task is EncoderTask.EMBED
    return EncoderTarget(
        task=encoder.task,
        width=spec.output_width,
        normalize=encoder.normalize if embed else False,
        labels=encoder.labels,
        triples=tuple(triples),
        expected_labels=tuple(expected_labels),
        max_batch_size=spec.batching.max_batch_size,
    )


def target_for_spec(
    spec: ModelSpec,
    triples: Sequence[tuple[str, str, str]] = (),
    expected_labels: Sequence[tuple[str, str]] = (),
    *,
    reference: bool = False,
) -> ModelTarget:
    """The probe's target for the served ``spec``: its full rendered contract, and for an encoder its facts and the
    stack's expected answers (``triples``/``expected_labels``, encoders only). With ``reference``, a generator with a
    reference (T5, GPT-2, GPT-J; a Llama/Qwen2 served by vLLM: :func:`~tritonft.probe.judge_reference.has_reference`)
    is judged against the reference of its original weights that its served model carries
    (:mod:`tritonft.probe.judge_reference`), as a stack's probe and judge do; a vLLM model is then asked the
    reference's greedy steps."""
    encoder = encoder_target(spec, triples, expected_labels) if spec.encoder is not None else None
    if spec.family.is_vllm:  # decoupled by design; asked PROBE_MAX_TOKENS greedy tokens, not max_output_len
        judged = reference and has_reference(spec)
        # Judged against its reference: asked exactly the greedy steps the reference followed.
        steps = min(REFERENCE_STEPS[spec.family], spec.max_output_len) if judged else None
        return ModelTarget(
            spec.name, spec.family, contract_for_spec(spec), steps, streaming=True, vllm=True, reference=judged
        )
    return ModelTarget(
        spec.name,
        spec.family,
        contract_for_spec(spec),
        None if encoder is not None else spec.max_output_len,
        streaming=spec.decoupled,
        encoder=encoder,
        reference=reference and has_reference(spec),
    )
