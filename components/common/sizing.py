"""Sizing decisions for the Kubernetes half, as pure functions of the model (no Pulumi here).

Every number a manifest carries that depends on the model comes from this module, with its formula written next
to it, so the choices can be read, tested and tuned in one place. Bandwidth defaults come from
``deploy-anchors.md``: 25 MB/s for a Hugging Face download (CoreWeave Job log, coreweave/kubernetes-cloud#148:
38 GB in 26 min) and ~17 MB/s for object storage (kserve#2529: "1 GB ... around 1 min+"); the model-load bandwidth
from a network volume (EFS/NFS) is stated as 50 MB/s, between those object-store figures and a local disk.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tritonft.engines import engine_for
from tritonft.reference_memory import largest_tensor_bytes, reference_memory_bytes
from tritonft.spec import ModelSpec, WeightDType, ceil_div

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
MB = 1000 * 1000

DOWNLOAD_BANDWIDTH = 25 * MB
"""Bytes/s assumed for a Hugging Face download (coreweave/kubernetes-cloud#148: 25.1 MB/s)."""
CONVERT_BANDWIDTH = 50 * MB
"""Bytes/s assumed for HF -> FT conversion incl. writing to the store (reference converter: 0.89 GB in 13 s on
2 cores, ft-format.md §8.3, i.e. ~70 MB/s; rounded down for network-volume writes)."""
LOAD_BANDWIDTH = 50 * MB
"""Bytes/s assumed for Triton reading the FT weights from the RWX model store at start-up."""
SERVER_START_SECONDS = 90
"""Fixed cost of a Triton start before the first weight byte is read: CUDA/NCCL init, backends, tokenizer models."""


def gib_ceil(nbytes: int) -> int:
    """Whole GiB needed to hold ``nbytes`` (at least 1)."""
    return max(1, ceil_div(nbytes, GIB))


def mib_ceil(nbytes: int) -> int:
    """Whole MiB needed to hold ``nbytes`` (at least 1)."""
    return max(1, ceil_div(nbytes, MIB))


def quantity_mi(nbytes: int) -> str:
    """A Kubernetes memory quantity in ``Mi`` (rounded up)."""
    return f"{mib_ceil(nbytes)}Mi"


def quantity_gi(nbytes: int) -> str:
    """A Kubernetes storage quantity in ``Gi`` (rounded up)."""
    return f"{gib_ceil(nbytes)}Gi"


# ---------------------------------------------------------------------------------------------------------------
# Model store


def download_bytes(model: ModelSpec) -> int:
    """Bytes the Hugging Face checkpoint occupies: parameters x 4 (checkpoints of these families are published in
    fp32; an fp16 checkpoint only makes this an over-estimate)."""
    return model.parameters * WeightDType.FP32.nbytes


def converted_bytes(model: ModelSpec) -> int:
    """Bytes of the converted model in the store, as its engine lays them out."""
    return engine_for(model.family).converted_bytes(model)


def stored_bytes(model: ModelSpec) -> int:
    """Bytes the model occupies in the store: its converted files, twice for an encoder (the conversion's
    ``model.onnx`` stays in the checkpoint directory, and its repository holds a copy: the ONNX Runtime backend loads
    ``model.onnx`` from the model's version directory)."""
    return converted_bytes(model) * (2 if model.family.is_encoder else 1)


STORE_HEADROOM = 2.0
"""Store size = converted bytes x headroom: room for one re-conversion (new revision) next to the serving one."""


def store_size_gi(models: tuple[ModelSpec, ...], headroom: float = STORE_HEADROOM) -> int:
    """Size of the model-store claim in GiB: ``ceil(sum(stored_bytes) x headroom / GiB)``, at least 1.

    The repository files (``config.pbtxt``, tokenizer files) are a few MB and are covered by the rounding.
    """
    if headroom < 1.0:
        raise ValueError(f"store headroom must be >= 1.0 (got {headroom}): the store must hold the models")
    total = sum(stored_bytes(m) for m in models)
    return gib_ceil(math.ceil(total * headroom))


# ---------------------------------------------------------------------------------------------------------------
# Conversion Job


@dataclass(frozen=True)
class JobSizing:
    """Resources and time limits of one model's conversion Job."""

    cpu_request: str
    cpu_limit: str
    memory_request: str
    memory_limit: str
    ephemeral_request: str
    ephemeral_limit: str
    scratch_size: str
    """``sizeLimit`` of the scratch emptyDir that holds the download."""
    active_deadline_seconds: int
    backoff_limit: int
    pulumi_timeout_minutes: int
    """How long ``pulumi up`` waits for the Job: every attempt to its deadline, plus node scale-up."""
    verify_generation: bool = False
    """Whether the Job runs ``tritonft verify --generate`` (the CPU reference fits the Job's memory)."""


JOB_BASE_MEMORY = 1 * GIB
"""Interpreter + numpy + safetensors + HF hub client (ft-format.md §8.3: 329 MiB for torch imports alone)."""
JOB_TENSOR_COPIES = 4
"""A streaming converter holds a tensor as read, cast, transposed/split and in the write buffer."""
NODE_SCALE_UP_SECONDS = 600
"""Budget for a new node to join and pull the image (GKE README: GPU node scale-up 4-7 min + image pull)."""
JOB_BACKOFF_LIMIT = 2
ENCODER_JOB_COPIES = 4
"""The ONNX converter holds the whole model while it builds the graph: the safetensors tensors as read and cast,
the graph's initialisers, the serialised ``model.onnx`` and the ONNX Runtime session that verifies it
(all-MiniLM-L6-v2, 90 MB at fp32: 508 MB peak RSS, 1.2 s, ``/usr/bin/time -v tritonft convert`` on this
project's machine)."""

ENCODER_CHECK_SECONDS = 60.0
"""Deadline added for an encoder's answer check (``tritonft verify OUT/onnx --generate``: one ONNX Runtime session and
a handful of short texts; all-MiniLM-L6-v2 takes about 2 s on one core)."""


REFERENCE_MEMORY_CAP = 8 * GIB
"""Largest Job memory granted so that ``tritonft verify --generate`` can run (a common CPU node holds it with room
to spare); models whose reference needs more are converted without the generation check."""
REFERENCE_FLOPS = 2e8
"""Conservative numpy float32 throughput of the reference: below the 0.24-0.33 GFLOP/s measured for gpt2 and
t5-small shapes on a heavily shared core (benchmarks/BENCHMARKS.md)."""
JUDGE_REFERENCE_FLOPS = 3e9
"""Effective float32 throughput assumed for the judge's reference step (its greedy steps are matrix-vector
products over every weight): 0.6 x the 4.9-5.2 GFLOP/s per CPU second measured for the step at t5-3b's and
gpt-j-6b's widths (benchmarks/BENCHMARKS.md, "The judge's reference step at the catalog's widths"); its Job requests
two cores."""
JUDGE_REFERENCE_CPU = 2
"""Cores of the reference Job (numpy's BLAS uses both; its limit is twice that)."""
JUDGE_REFERENCE_BACKOFF_LIMIT = 1
"""The reference Job retries once (a download cut off); its step is deterministic, so a step that failed twice fails
again. Pulumi's wait covers both tries: t5-3b's reference Job then waits no longer than its conversion Job."""
JUDGED_TOKENS = 8 * 64
"""Tokens the judgement generates at most: T5, 8 bundled sentences x 64 tokens (GPT: 1 prompt x 32)."""


def judge_reference_tokens(model: ModelSpec) -> int:
    """Greedy steps of the judge's reference (``tritonft reference``): every judged prompt followed over its steps,
    and its near-ties' branches within their budget
    (:func:`tritonft.probe.judge_reference.reference_greedy_tokens`)."""
    from tritonft.probe.judge_reference import reference_greedy_tokens

    return reference_greedy_tokens(model.family, model.max_output_len)


def judge_reference_seconds(model: ModelSpec, convert_bw: int) -> float:
    """Upper estimate of the judge's reference step: the fp32 conversion it reads, then 2 FLOPs per parameter per
    step at :data:`JUDGE_REFERENCE_FLOPS` (plus T5's encoder, once per prompt: inside the factor's slack)."""
    fp32 = model.parameters * WeightDType.FP32.nbytes
    return fp32 / convert_bw + judge_reference_tokens(model) * 2 * model.parameters / JUDGE_REFERENCE_FLOPS


def judge_reference_job_sizing(
    model: ModelSpec, download_bw: int = DOWNLOAD_BANDWIDTH, convert_bw: int = CONVERT_BANDWIDTH
) -> JobSizing:
    """Resources and deadlines of a FasterTransformer generator's reference Job (download -> ``tritonft
    reference``), which runs beside its conversion Job:

    * memory request = limit = :func:`reference_memory_bytes` (every weight at fp32, the largest tensor's shards);
    * CPU :data:`JUDGE_REFERENCE_CPU` (limit twice that): the greedy steps are numpy matrix products;
    * scratch = the download x 1.2 + 1 GiB, plus its fp32 conversion (4 bytes per parameter);
    * deadline = 2 x download / 25 MB/s + 10 min + :func:`judge_reference_seconds`;
    * one retry (:data:`JUDGE_REFERENCE_BACKOFF_LIMIT`), and Pulumi waits both tries plus one node scale-up.
    """
    if not model.family.is_fastertransformer:
        raise ValueError(f"{model.name} is a {model.family} model: only T5/GPT-2/GPT-J have a judge's reference Job")
    dl = download_bytes(model)
    memory = reference_memory_bytes(model)
    scratch = math.ceil(dl * 1.2) + GIB + model.parameters * WeightDType.FP32.nbytes
    seconds = 2 * dl / download_bw + 600 + judge_reference_seconds(model, convert_bw)
    return _sized_job(JUDGE_REFERENCE_CPU, memory, scratch, seconds, False, backoff_limit=JUDGE_REFERENCE_BACKOFF_LIMIT)


def reference_seconds(model: ModelSpec) -> float:
    """Upper estimate of the generation check's time: 2 FLOPs per parameter per token (plus T5's encoder)."""
    return JUDGED_TOKENS * 2 * model.parameters / REFERENCE_FLOPS


def job_sizing(
    model: ModelSpec,
    download_bw: int = DOWNLOAD_BANDWIDTH,
    convert_bw: int = CONVERT_BANDWIDTH,
    verify_generation: bool = True,
) -> JobSizing:
    """Resources and deadlines of the conversion Job, from the model alone.

    * memory request = limit = 1 GiB + 4 x largest fp32 tensor (ft-format.md §8.3: a streaming converter ran the
      0.89 GB t5-base in 1.07 GiB; the reference one needed 2.7 GiB because it copies the whole state dict);
    * CPU: 1 core up to 2 GB of weights, else 2; limit = 2 x request (conversion is I/O bound; bursts on casts);
    * scratch (download) = download bytes x 1.2 + 1 GiB (HF cache metadata, partial files); ephemeral request =
      scratch + 1 GiB for logs and ``/tmp``;
    * deadline = 2 x (download / 25 MB/s + converted / 50 MB/s) + 10 min, rounded up to the minute; the factor 2
      absorbs slower mirrors without letting a hung download hold a node forever;
    * Pulumi waits (backoff + 1) deadlines plus one node scale-up;
    * with ``verify_generation``, when the CPU reference's memory (:func:`reference_memory_bytes`) is at most
      :data:`REFERENCE_MEMORY_CAP`, the memory is raised to it, the deadline grows by :func:`reference_seconds`
      and the Job runs ``tritonft verify --generate``; larger models skip the check;
    * a FasterTransformer generator's judge's reference is computed by its own Job beside this one
      (:func:`judge_reference_job_sizing`); neither waits for the other, so neither's time adds to the other's;
    * an encoder (ONNX): memory = 1 GiB + 4 x its fp32 weights (:data:`ENCODER_JOB_COPIES`); with
      ``verify_generation`` the Job runs ``tritonft verify OUT/onnx --generate`` (ONNX Runtime answers the probe's
      texts, judged as the probe judges them: one session of the model, within that memory) and the deadline grows
      by :data:`ENCODER_CHECK_SECONDS`.
    """
    if model.family.is_vllm:
        return vllm_job_sizing(model, download_bw)
    dl = download_bytes(model)
    conv = converted_bytes(model)
    memory = JOB_BASE_MEMORY + JOB_TENSOR_COPIES * largest_tensor_bytes(model)
    if model.family.is_encoder:  # the whole graph in memory, not a stream of tensors
        memory = JOB_BASE_MEMORY + ENCODER_JOB_COPIES * model.parameters * WeightDType.FP32.nbytes
    if model.family.is_encoder:
        checks = verify_generation
        check_seconds = ENCODER_CHECK_SECONDS if checks else 0.0
    else:
        checks = verify_generation and reference_memory_bytes(model) <= REFERENCE_MEMORY_CAP
        check_seconds = reference_seconds(model) if checks else 0.0
    if checks and not model.family.is_encoder:
        memory = max(memory, reference_memory_bytes(model))
    cpu = 1 if conv <= 2 * GIB else 2
    scratch = math.ceil(dl * 1.2) + GIB
    seconds = 2 * (dl / download_bw + conv / convert_bw) + 600 + check_seconds
    return _sized_job(cpu, memory, scratch, seconds, checks)


def _sized_job(
    cpu: int, memory: int, scratch: int, seconds: float, checks: bool, *, backoff_limit: int = JOB_BACKOFF_LIMIT
) -> JobSizing:
    """A Job with ``cpu`` (limit twice that), ``memory`` (request = limit), ``scratch`` bytes of emptyDir (plus
    1 GiB of other ephemeral storage), a deadline of ``seconds`` rounded up to the minute, and Pulumi's wait
    covering every try plus one node scale-up."""
    deadline = 60 * math.ceil(seconds / 60)
    wait_seconds = (backoff_limit + 1) * deadline + NODE_SCALE_UP_SECONDS
    return JobSizing(
        cpu_request=str(cpu),
        cpu_limit=str(2 * cpu),
        memory_request=quantity_mi(memory),
        memory_limit=quantity_mi(memory),
        ephemeral_request=quantity_gi(scratch + GIB),
        ephemeral_limit=quantity_gi(scratch + GIB),
        scratch_size=quantity_gi(scratch),
        active_deadline_seconds=deadline,
        backoff_limit=backoff_limit,
        pulumi_timeout_minutes=math.ceil(wait_seconds / 60),
        verify_generation=checks,
    )


VLLM_JOB_MEMORY = 2 * GIB
"""A vLLM model's Job holds no tensor: the Hub client streams each file to disk and ``tritonft download`` hashes it in
chunks (1 GiB of interpreter and clients as :data:`JOB_BASE_MEMORY`, plus 1 GiB for the hashing threads' buffers and
the page cache the copy onto the store dirties)."""


def vllm_reference_seconds(model: ModelSpec, read_bw: int = CONVERT_BANDWIDTH) -> float:
    """Upper estimate of a vLLM model's reference step (``tritonft reference`` on its Hugging Face files): reading
    them from the store, then 2 FLOPs per parameter for every token it runs at :data:`JUDGE_REFERENCE_FLOPS` (the
    judged prompts' own tokens, up to 16 each, and the greedy steps)."""
    from tritonft.probe.judge_reference import CHAT_CONVERSATIONS, reference_greedy_tokens, reference_prompts

    prompt_tokens = len(reference_prompts(model.family)) * VLLM_REFERENCE_PROMPT_TOKENS
    prompt_tokens += len(CHAT_CONVERSATIONS) * VLLM_REFERENCE_CHAT_TOKENS
    tokens = prompt_tokens + reference_greedy_tokens(model.family, model.max_output_len, chats=True)
    return converted_bytes(model) / read_bw + tokens * 2 * model.parameters / JUDGE_REFERENCE_FLOPS


VLLM_REFERENCE_PROMPT_TOKENS = 16
"""Tokens of each judged prompt at most, as a Llama 3 or Qwen2 tokenizer cuts them (12-14 for the longest, BOS
included): the reference runs them once per prompt."""
VLLM_REFERENCE_CHAT_TOKENS = 64
"""Tokens of the judge's conversation in its expected rendering, at most: estimated from the templates' text, Llama
3.1 Instruct's writes it in about 55 (its system header adds the knowledge and today's dates, and each turn a header
of 3 special tokens), Qwen2.5's in about 35. A model without a chat template runs none; counted all the same."""


def vllm_job_sizing(model: ModelSpec, download_bw: int = DOWNLOAD_BANDWIDTH) -> JobSizing:
    """Resources and deadlines of a vLLM model's Job (download -> the judge's reference -> repo, no conversion).

    * memory request = limit = :data:`VLLM_JOB_MEMORY` (no tensor is loaded by the download); with the judge's
      reference (:func:`tritonft.probe.judge_reference.has_reference`), :func:`reference_memory_bytes` (every weight
      at fp32, as a FasterTransformer generator's reference Job);
    * CPU 1 (limit 2: the hashing threads); with the reference :data:`JUDGE_REFERENCE_CPU` (limit twice that);
    * scratch = the Hub's cache of the files (their bytes as published, ``converted_bytes``) x 1.2 + 1 GiB; the
      files are copied from it onto the store, then it is dropped;
    * deadline = 2 x (bytes / download bandwidth + bytes / store write bandwidth) + 10 min, plus the reference step
      (:func:`vllm_reference_seconds`), to the minute; Pulumi waits (backoff + 1) deadlines plus one node scale-up,
      as for a conversion; with the reference, one retry (:data:`JUDGE_REFERENCE_BACKOFF_LIMIT`, as a reference Job:
      the step is deterministic, and a rerun finds the download complete), so Pulumi's wait for Llama 3.1 8B's Job
      (128 min) stays below what it was without the step (139 min);
    * no generation check (``verify_generation`` False): the tools image has no vLLM; the judge compares the served
      answers with the reference.
    """
    from tritonft.probe.judge_reference import has_reference

    files = converted_bytes(model)
    scratch = math.ceil(files * 1.2) + GIB
    seconds = 2 * (files / download_bw + files / CONVERT_BANDWIDTH) + 600
    if not has_reference(model):
        return _sized_job(1, VLLM_JOB_MEMORY, scratch, seconds, checks=False)
    memory = max(VLLM_JOB_MEMORY, reference_memory_bytes(model))
    seconds += vllm_reference_seconds(model)
    return _sized_job(
        JUDGE_REFERENCE_CPU, memory, scratch, seconds, checks=False, backoff_limit=JUDGE_REFERENCE_BACKOFF_LIMIT
    )


# ---------------------------------------------------------------------------------------------------------------
# Triton server pod


def shm_bytes(model: ModelSpec) -> int:
    """``/dev/shm`` size: 1 GiB + 256 MiB per GPU beyond the first.

    1 GiB is the FasterTransformer backend's own recipe (``docker run --shm-size=1g``, seed 001 and the FTB README);
    NCCL's shared-memory transport grows with the number of ranks, hence the per-GPU term.
    """
    return GIB + 256 * MIB * (model.gpus - 1)


SERVER_BASE_MEMORY = 3 * GIB
"""tritonserver + the Python backend stubs of the tokenizer pre/post-processing models."""


@dataclass(frozen=True)
class ServerSizing:
    """Resources of one Triton pod."""

    gpus: int
    cpu_request: str
    cpu_limit: str
    memory_request: str
    memory_limit: str
    shm_size: str
    ephemeral_request: str
    ephemeral_limit: str
    tmp_size: str = "1Gi"
    """``sizeLimit`` of the pod's ``/tmp`` emptyDir (``HOME`` of the server)."""


CPU_SERVER_BASE_MEMORY = 1 * GIB
"""tritonserver with its ONNX Runtime and Python backends loaded, plus the Python stub of the tokenizer model
(the ``tokenizers`` library and one vocabulary): no CUDA context, no FasterTransformer."""
CPU_SHM = 256 * MIB
"""``/dev/shm`` of a CPU replica: the Python backend's shared-memory pool between Triton and the tokenizer model's
stub (it starts at a few MiB and grows by 1 MiB steps with the texts in flight); no NCCL."""
ORT_LOAD_COPIES = 2
"""ONNX Runtime holds the parsed ``model.onnx`` and the session's initialised weights at once while it loads."""
ORT_ARENA_GROWTH = 2
"""ONNX Runtime's CPU arena grows to the next power of two (``kNextPowerOfTwo``): up to 2 x the activations."""


def encoder_activation_bytes(model: ModelSpec) -> int:
    """Activations of one full batch of an encoder at fp32, the largest layer's worth (ORT reuses buffers between
    layers): ``max_batch x max_seq x (heads x max_seq + d_ff + 6 x d_model) x 4`` (attention scores, the FFN's
    intermediate, Q/K/V/context/residual/output)."""
    if model.encoder is None:
        raise ValueError(f"model {model.name!r} ({model.family}) is not an encoder")
    arch, seq = model.architecture, model.encoder.max_seq_length
    per_token = arch.num_heads * seq + arch.d_ff + 6 * arch.d_model
    return model.batching.max_batch_size * seq * per_token * WeightDType.FP32.nbytes


def cpu_server_sizing(model: ModelSpec) -> ServerSizing:
    """Resources of a Triton pod serving an encoder on CPU nodes (``device: cpu``): no GPU.

    * memory request = limit = 1 GiB (server, backends, tokenizer stub) + 256 MiB /dev/shm (charged to the pod) +
      per instance of the ONNX model: 2 x the ONNX weights (ONNX Runtime's load peak) + 2 x one full batch's
      activations (:func:`encoder_activation_bytes`, its arena's power-of-two growth);
    * CPU request = 1 per ONNX instance (its intra-op threads) + 1 (HTTP/gRPC and the tokenizer); limit = 2 x
      request, so ONNX Runtime's thread pool can burst on an idle node;
    * ephemeral storage 2 GiB, as on GPU.
    """
    instances = max(1, model.instances)
    per_instance = ORT_LOAD_COPIES * converted_bytes(model) + ORT_ARENA_GROWTH * encoder_activation_bytes(model)
    memory = CPU_SERVER_BASE_MEMORY + CPU_SHM + instances * per_instance
    cpu = instances + 1
    return ServerSizing(
        gpus=0,
        cpu_request=str(cpu),
        cpu_limit=str(2 * cpu),
        memory_request=quantity_mi(memory),
        memory_limit=quantity_mi(memory),
        shm_size=quantity_mi(CPU_SHM),
        ephemeral_request="2Gi",
        ephemeral_limit="2Gi",
    )


def server_sizing(model: ModelSpec, node_cpus: int | None = None) -> ServerSizing:
    """Resources of a Triton pod serving ``model`` (on CPU nodes: :func:`cpu_server_sizing`).

    * GPUs = TP x PP (one replica of the model; ft-format.md §6);
    * memory request = limit = 3 GiB + /dev/shm (a memory emptyDir is charged to the pod's memory cgroup, so it
      must be in the request, deploy-anchors.md §6.4) + 2 x largest fp32 tensor (FT stages each tensor in host
      memory before copying it to the GPU);
    * CPU request = 2 + 1 per GPU (one feeder thread per rank plus HTTP/gRPC and tokenizers); limit = 2 x request;
    * ephemeral storage 2 GiB (logs and ``/tmp``; the weights live on the store volume).

    An encoder on a GPU takes one GPU, like a one-GPU generator, and the same host-memory rule (ONNX Runtime's
    TensorRT accelerator stages the weights in host memory as FT does).

    ``node_cpus``: the GPU node's CPUs, a vLLM engine's CPU limit (:func:`vllm_server_sizing`); None: not known.
    """
    if model.on_cpu:
        return cpu_server_sizing(model)
    if model.family.is_vllm:
        return vllm_server_sizing(model, node_cpus)
    shm = shm_bytes(model)
    memory = SERVER_BASE_MEMORY + shm + 2 * largest_tensor_bytes(model)
    cpu = 2 + model.gpus
    return ServerSizing(
        gpus=model.gpus,
        cpu_request=str(cpu),
        cpu_limit=str(2 * cpu),
        memory_request=quantity_mi(memory),
        memory_limit=quantity_mi(memory),
        shm_size=quantity_mi(shm),
        ephemeral_request="2Gi",
        ephemeral_limit="2Gi",
    )


VLLM_WORKER_MEMORY = 4 * GIB
"""Host memory of one vLLM GPU worker process: torch and the CUDA context (~2 GiB as for a Triton process), the
safetensors it maps while loading its shard (``load_format: safetensors`` reads through the page cache, charged to
the pod as it is touched) and the pinned buffers of the sampler and the scheduler's outputs."""
VLLM_TMP = 4 * GIB
"""``/tmp`` of a vLLM pod (``HOME=/tmp``): what the engine's libraries cache under ``HOME`` (the root filesystem is
read-only); torch.compile's artifacts and the kernels it builds (hundreds of MiB per model) are in vLLM's cache root
on the store instead (``components.serving.server_spec.compile_cache_volume``), kept across the pod's restarts."""


def vllm_cpu_limit(request: int, node_cpus: int | None) -> int:
    """The vLLM server container's CPU limit: the GPU node's CPUs (never below the ``request``), else, the node not
    known, twice the request.

    A CPU limit is a CFS quota per 100 ms period over every thread of the container: once they have used
    ``limit`` x 100 ms of CPU in a period, all of them wait for the next one, the engine's busy scheduler loop
    included, and each such stall adds up to the rest of the period to the step in flight (time to first token, time
    per token). The container runs several busy processes at once (tritonserver's HTTP/gRPC threads, the backend's
    front with the tokenizer, vLLM's engine core, a worker per GPU), so a burst (a batch of long prompts tokenized
    while the engine steps) can spend a quota of twice the request within a period. At the node's CPUs the quota is
    never below what the container can use at once (it cannot run on more cores than the node has): CFS never
    throttles it, while the policy's rule that every container has a limit holds without an exception. The
    request (2 + 1 per GPU) is what the scheduler reserves and what CFS's shares guarantee under contention.
    """
    if node_cpus is None:
        return 2 * request
    return max(node_cpus, request)


def vllm_server_sizing(model: ModelSpec, node_cpus: int | None = None) -> ServerSizing:
    """Resources of a Triton pod serving a Llama-family model through the vLLM backend.

    * GPUs = TP (``tensorParallel``: vLLM's ``tensor_parallel_size``);
    * ``/dev/shm`` as for any GPU model (:func:`shm_bytes`: 1 GiB, NVIDIA's vLLM backend quick start runs its image
      with ``--shm-size=1G``; + 256 MiB per GPU beyond the first for vLLM's workers' message queue and NCCL);
    * memory request = limit = 3 GiB (tritonserver, the Python backend stub, the engine's front process) + /dev/shm +
      :data:`VLLM_WORKER_MEMORY` per GPU (one worker process per rank);
    * CPU request = 2 + 1 per GPU (the engine's scheduler and tokenizer, one feeder per rank); limit = the GPU
      node's CPUs (``node_cpus``; :func:`vllm_cpu_limit`: no CFS throttling of the engine), twice the request when
      the node is not known;
    * ephemeral storage = 2 GiB + :data:`VLLM_TMP` (``/tmp``; the compile cache is on the store).
    """
    shm = shm_bytes(model)
    memory = SERVER_BASE_MEMORY + shm + VLLM_WORKER_MEMORY * model.gpus
    cpu = 2 + model.gpus
    ephemeral = quantity_gi(2 * GIB + VLLM_TMP)
    return ServerSizing(
        gpus=model.gpus,
        cpu_request=str(cpu),
        cpu_limit=str(vllm_cpu_limit(cpu, node_cpus)),
        memory_request=quantity_mi(memory),
        memory_limit=quantity_mi(memory),
        shm_size=quantity_mi(shm),
        ephemeral_request=ephemeral,
        ephemeral_limit=ephemeral,
        tmp_size=quantity_gi(VLLM_TMP),
    )


@dataclass(frozen=True)
class StartupBudget:
    """The startupProbe that lets a model load and no longer: ``period x failure_threshold`` seconds."""

    period_seconds: int
    failure_threshold: int

    @property
    def seconds(self) -> int:
        return self.period_seconds * self.failure_threshold


VLLM_ENGINE_START_SECONDS = 120
"""What a vLLM engine adds to a Triton start once its weights are read: the memory profiling run that sizes the KV
cache, torch.compile of the model's graph (cached in ``/tmp`` for the pod's life only) and the CUDA-graph capture of
each batch size (vLLM's own log times each step at start-up; tens of seconds each on a GPU for a 7-8B model)."""
STARTUP_SAFETY = 1.5
"""Margin on the estimate: a shared volume under contention (several pods starting at once) reads slower."""


def startup_budget(
    model: ModelSpec,
    load_bandwidth: int = LOAD_BANDWIDTH,
    period_seconds: int = 10,
    server_start_seconds: int = SERVER_START_SECONDS,
) -> StartupBudget:
    """How long the startupProbe waits for ``/v2/health/ready``: (start + bytes / bandwidth) x 1.5, in periods
    (a vLLM model's start adds :data:`VLLM_ENGINE_START_SECONDS`).

    ``failure_threshold = ceil((server_start + converted_bytes / load_bandwidth) x 1.5 / period)``. Fixed budgets
    (180 s, 5 min, 15 min in the anchors, deploy-anchors.md §5) kill large models mid-load (server#7014, #7154)
    and leave small ones hanging for minutes when they are broken.
    """
    if load_bandwidth <= 0:
        raise ValueError(f"load bandwidth must be positive bytes/s (got {load_bandwidth})")
    if period_seconds <= 0:
        raise ValueError(f"probe period must be positive seconds (got {period_seconds})")
    if model.family.is_vllm:
        server_start_seconds += VLLM_ENGINE_START_SECONDS
    seconds = (server_start_seconds + converted_bytes(model) / load_bandwidth) * STARTUP_SAFETY
    return StartupBudget(period_seconds=period_seconds, failure_threshold=max(1, math.ceil(seconds / period_seconds)))


def rollout_timeout_minutes(budget: StartupBudget, init_seconds: int = 0, drain_seconds: int = 0) -> int:
    """How long ``pulumi up`` waits for the Deployment (the rollout watch's deadline, whole minutes): one startup
    budget plus a node scale-up (and image pull), plus ``init_seconds`` the pod's init containers may take before
    Triton starts (the GEMM tuning), plus ``drain_seconds``: the replaced pod's ``terminationGracePeriodSeconds``
    (its preStop drain), which a new pod waits out whenever it needs the GPUs the old one still holds (a rollout
    that replaces, ``maxSurge: 0``, or a surge with no free GPU node). Without it a healthy rollout of a model
    exposed on the edge (a drain of up to ~315 s) fails ``up``."""
    return math.ceil((budget.seconds + init_seconds + NODE_SCALE_UP_SECONDS + drain_seconds) / 60)


def progress_deadline_seconds(budget: StartupBudget, init_seconds: int = 0, drain_seconds: int = 0) -> int:
    """``progressDeadlineSeconds`` of the Deployment: must outlast a startup (init containers included, whose
    time the startupProbe does not see: it starts with the Triton container) and the drain of the pod it replaces
    (``drain_seconds``, as in :func:`rollout_timeout_minutes`: the controller records no progress while the new
    pod waits for the old one's GPUs), or the rollout is marked failed."""
    return budget.seconds + init_seconds + NODE_SCALE_UP_SECONDS + drain_seconds


def scale_down_window_seconds(budget: StartupBudget) -> int:
    """HPA scale-down stabilization: at least 10 min, and at least twice a cold start (node + model load).

    Removing a replica that takes minutes to come back only pays off when the lower load has lasted longer than
    getting it back would take.
    """
    return min(HPA_MAX_WINDOW_SECONDS, max(600, 2 * (budget.seconds + NODE_SCALE_UP_SECONDS)))


HPA_MAX_WINDOW_SECONDS = 3600
"""The API's upper bound for ``stabilizationWindowSeconds``."""
