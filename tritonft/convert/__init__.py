"""Hugging Face -> FasterTransformer weight conversion (T5, GPT-2, GPT-J), per ``reference/ft-format.md``.

Modules, one concern each: :mod:`.tensors` (reading safetensors / torch checkpoints one tensor at a time),
:mod:`.plan` (the file/transform vocabulary and tensor validation), :mod:`.t5` / :mod:`.gpt2` / :mod:`.gptj`
(per-family plans), :mod:`.model` (config.json -> family -> plan), :mod:`.ini` (``config.ini``),
:mod:`.writer` (atomic, idempotent, streaming writer + the ``manifest.json`` schema), :mod:`.verify`
(re-checking a written directory), :mod:`.progress`, and the CLI commands :mod:`.cmd_convert`,
:mod:`.cmd_verify`.
"""
