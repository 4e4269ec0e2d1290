"""The stack configuration schema: every knob once, with its type, default and meaning.

Validation (``components.settings.load``), the configuration reference (docs/reference/) and the typed ``config:`` block
of ``Pulumi.yaml`` are all generated from these tables, so the three cannot drift apart.

Values reach the program the way the Pulumi CLI passes them: every value is a string, objects and lists are
JSON. ``parse_value`` turns one raw string into a typed value or a problem message that names the fix.
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from components.settings import api_keys, aws_names, kube
from components.settings.alerting import ALERT_FOR, ROUTES, credential_file_problems, duration_problem
from components.settings.chart_facts import autoscaler_minors_text, minors_span
from components.settings.eks import DEFAULT_KUBERNETES_VERSION, EKS_VERSIONS, LOG_RETENTION_DAYS, NAT_MODES
from components.settings.gpus import AWS_GPU_INSTANCES, GPU_MODELS
from tritonft.engines import ENGINES, FASTERTRANSFORMER
from tritonft.engines.fastertransformer.versions import DEFAULT_CUDA_ARCHS, FT_BACKEND_COMMIT, FT_COMMIT, TRITON_VERSION
from tritonft.engines.vllm.rules import ARCHITECTURES, DTYPES
from tritonft.quantity import quantity, quantity_value

KnobType = Literal["string", "integer", "boolean", "array", "object", "quantity"]
Scope = Literal["any", "kubernetes", "aws"]

_UNIT_SUFFIX = re.compile(r"^\s*\d+(\.\d+)?\s*([A-Za-z]+)\s*$")
_GIT_SHA = re.compile(r"^[0-9a-f]{40}$")
_HEX = re.compile(r"^[0-9a-fA-F]{4,39}$")
_BRANCHES = frozenset({"main", "master", "HEAD", "dev", "develop"})
_HF_REPO = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")
_DIGEST_REF = re.compile(r"^[a-z0-9][a-z0-9._:/-]*(:[\w][\w.-]{0,127})?@sha256:[0-9a-f]{64}$")
_REGISTRY = re.compile(r"^[a-zA-Z0-9.-]+(:\d+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*$")
_AWS_ID = {"vpc-id": "vpc", "subnet-id": "subnet"}
_K8S_VERSION = re.compile(r"^1\.\d{2}$")
_TRITON_RELEASE = re.compile(r"^\d{2}\.\d{2}$")
_KMS_KEY_ARN = re.compile(
    r"^arn:aws(-[a-z]+)*:kms:[a-z]{2}(-[a-z]+)+-\d:\d{12}:key/[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$"
)
_CUDA_ARCH = re.compile(r"^[5-9][0-9]$")
_URL = re.compile(r"^https?://[A-Za-z0-9.-]+(:\d+)?(/\S*)?$")
TOLERATION_FIELDS = ("key", "operator", "value", "effect", "tolerationSeconds")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
MIN_VPC_PREFIX, MAX_VPC_PREFIX = 16, 21
"""The VPC is cut into 8 blocks for node and pod IPs: /21 is the smallest that leaves room."""

Check = Callable[[Any], list[tuple[str, str]]]
"""A format check: the parsed value -> [(sub-path such as `[1]` or '', problem)]."""


@dataclass(frozen=True)
class Format:
    """A value grammar beyond the type (Kubernetes/DNS names, shas, CIDRs ...)."""

    doc: str
    check: Check
    bad: Any
    """A value of the right type that breaks the grammar (drives the generated bad-config test)."""
    good: Any
    """A value that follows it (an example for docs and tests)."""


def _strings(check: Callable[[str], list[str]]) -> Check:
    """Apply a string check to a value, or to each item of a list of strings."""

    def run(value: Any) -> list[tuple[str, str]]:
        if isinstance(value, list):
            return [(f"[{i}]", f"{item!r} {p}") for i, item in enumerate(value) for p in check(item)]
        return [("", f"{value!r} {p}") for p in check(value)]

    return run


def _git_sha(value: str) -> list[str]:
    if _GIT_SHA.match(value):
        return []
    if value in _BRANCHES:
        return ["is a branch, so the weights could change under the same key; pin the full 40-hex commit sha"]
    if _HEX.match(value):
        return [
            f"is an abbreviated or mixed-case sha ({len(value)} hex digits): the Hub does not resolve it as a pinned "
            "commit; write the full 40 lower-case hex digits (the commit's page or `git rev-parse` shows it)"
        ]
    return ["is not a full git commit sha: write the 40 lower-case hex digits of the commit (never a branch or tag)"]


def _regex(pattern: re.Pattern[str], what: str) -> Callable[[str], list[str]]:
    return lambda value: [] if pattern.match(value) else [f"is not {what}"]


def _hf_repo(value: str) -> list[str]:
    if _HF_REPO.match(value) and len(value) <= 96 and "--" not in value and ".." not in value:
        return []
    return ["is not a Hugging Face repository id like `t5-small` or `org/name`"]


_EMAIL = re.compile(r"^[^@\s]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$")


def _email(value: str) -> list[str]:
    return [] if _EMAIL.match(value) else ["is not an e-mail address like ops@example.com"]


def _host_port(value: str) -> list[str]:
    host, _, port = value.rpartition(":")
    if not host or kube.ingress_host(host) or not port.isdigit() or not 0 < int(port) < 65536:
        return ["is not `<DNS name>:<port>`; e.g. `edge-limits.abc123.cache.amazonaws.com:6379`"]
    return []


def _vpc_cidr(value: str) -> list[str]:
    try:
        network = ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        return [f"is not an IPv4 CIDR block ({exc}); e.g. 10.0.0.0/16"]
    if not MIN_VPC_PREFIX <= network.prefixlen <= MAX_VPC_PREFIX:
        return [
            f"must be a /{MIN_VPC_PREFIX} to /{MAX_VPC_PREFIX} block (room for node and pod IPs), "
            f"got /{network.prefixlen}"
        ]
    return []


def _aws_id(kind: str) -> Callable[[str], list[str]]:
    pattern = re.compile(rf"^{kind}-[0-9a-f]{{8}}([0-9a-f]{{9}})?$")
    return _regex(pattern, f"an AWS {kind} id like `{kind}-0123456789abcdef0`")


def _positive_quantity(value: str) -> list[str]:
    problems = quantity(value)
    if not problems and quantity_value(value) <= 0:
        problems.append("must be greater than 0")
    return problems


def _positive_seconds(value: str) -> list[str]:
    """A positive number of seconds, written as a Kubernetes quantity (what the HPA's target takes)."""
    fix = "write the seconds as a number, e.g. '1', '1.5' or '750m' (0.75 s)"
    problems = quantity(value)
    if problems:
        return [f"is not a number of seconds: {fix}"]
    if quantity_value(value) <= 0:
        return [f"must be more than 0 seconds: {fix}"]
    return []


def _label_map(value: Any) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    for key, val in value.items():
        problems += [("", f"label key {key!r} {p}") for p in kube.qualified_name(str(key))]
        if not isinstance(val, str):
            problems.append(
                ("", f"label {key!r}: the value must be a string (quote numbers and booleans), got {val!r}")
            )
        else:
            problems += [("", f"label {key!r}: value {val!r} {p}") for p in kube.label_value(val)]
    return problems


def _tolerations(value: Any) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    for i, tol in enumerate(value):
        at = f"[{i}]"
        unknown = sorted(set(tol) - set(TOLERATION_FIELDS))
        if unknown:
            problems.append((at, f"unknown field(s) {unknown}; a toleration has {', '.join(TOLERATION_FIELDS)}"))
        operator = tol.get("operator", "Equal")
        if operator not in ("Exists", "Equal"):
            problems.append((at, f"operator {operator!r} must be Exists or Equal"))
        key, val = tol.get("key", ""), tol.get("value", "")
        if not isinstance(key, str) or not isinstance(val, str):
            problems.append((at, "key and value must be strings"))
            continue
        if key:
            problems += [(at, f"key {key!r} {p}") for p in kube.qualified_name(key)]
        elif operator != "Exists":
            problems.append((at, "needs a `key` unless operator is Exists (which then tolerates every taint)"))
        if operator == "Exists" and val:
            problems.append((at, "value must be empty when operator is Exists"))
        problems += [(at, f"value {val!r} {p}") for p in kube.label_value(val)]
        effect = tol.get("effect", "")
        if effect and effect not in TAINT_EFFECTS:
            problems.append((at, f"effect {effect!r} must be one of {', '.join(TAINT_EFFECTS)} (or omitted)"))
    return problems


def _alert_durations(value: Any) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    for name, duration in value.items():
        if name not in ALERT_FOR:
            near = difflib.get_close_matches(str(name), ALERT_FOR, n=1)
            hint = f" (did you mean {near[0]}?)" if near else ""
            problems.append(("", f"{name!r} is not one of the alerts{hint}: {', '.join(ALERT_FOR)}"))
        elif problem := duration_problem(duration):
            problems.append(("", f"{name}: {problem}"))
    return problems


_BASE_REF = re.compile(r"^[a-z0-9][a-z0-9._/-]*(?::[0-9]+/[a-z0-9._/-]+)?:[\w][\w.-]{0,127}$")
_SHA256 = re.compile(r"^sha256:[0-9a-f]{64}$")


def _base_digests(value: Any) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    for ref, digest in value.items():
        if not _BASE_REF.match(str(ref)):
            problems.append(("", f"{ref!r} is not a `repository:tag` reference as a Dockerfile names its base"))
        if not isinstance(digest, str) or not _SHA256.match(digest):
            problems.append(("", f"{ref}: {digest!r} is not a digest; use `sha256:<64 hex digits>`"))
    return problems


ENGINES_WITH_OWN_IMAGE = tuple(e.name for e in ENGINES if e.server_image != FASTERTRANSFORMER.server_image)
"""The serving engines whose server image is not FasterTransformer's (``engineImages`` keys): ONNX Runtime's, vLLM's."""


def _engine_images(value: Any) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    for engine, ref in value.items():
        if engine not in ENGINES_WITH_OWN_IMAGE:
            problems.append(
                (
                    "",
                    f"{engine!r} is not an engine with its own server image; the keys are "
                    f"{', '.join(ENGINES_WITH_OWN_IMAGE)} (FasterTransformer's image is `serverImage`)",
                )
            )
        elif not isinstance(ref, str) or not _DIGEST_REF.match(ref):
            problems.append(
                ("", f"{engine}: {ref!r} is not pinned by digest; use `repo@sha256:<64 hex>` (tags can move under you)")
            )
    return problems


def _encoder_labels(value: Any) -> list[tuple[str, str]]:
    if len(value) < 2:
        return [("", f"a classifier needs at least two labels (its id2label names in index order), got {value!r}")]
    problems = [(f"[{i}]", "must be a non-empty label name") for i, label in enumerate(value) if not label.strip()]
    repeated = sorted({label for label in value if value.count(label) > 1})
    if repeated:
        problems.append(("", f"names {repeated} more than once; each logit index has its own label"))
    return problems


def _probe_triples(value: Any) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    if not value:
        return [("", "needs at least one {anchor, closer, farther} triple (leave the key out for the default ones)")]
    for i, triple in enumerate(value):
        fields = set(triple)
        if fields != set(PROBE_TRIPLE_FIELDS):
            problems.append(
                (f"[{i}]", f"has the fields {sorted(fields)}; a triple has exactly {', '.join(PROBE_TRIPLE_FIELDS)}")
            )
            continue
        for name in PROBE_TRIPLE_FIELDS:
            text = triple[name]
            if not isinstance(text, str) or not text.strip():
                problems.append((f"[{i}].{name}", f"must be a non-empty sentence, got {text!r}"))
    return problems


def _probe_labels(value: Any) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    if not value:
        return [("", "needs at least one `text: label` pair (leave the key out to check only the answers' shape)")]
    for text, label in value.items():
        if not str(text).strip():
            problems.append(("", "a text to classify must not be empty"))
        if not isinstance(label, str) or not label.strip():
            problems.append(("", f"{text!r}: the expected label must be a non-empty string, got {label!r}"))
    return problems


VLLM_FIELDS: dict[str, tuple[str, str]] = {
    # stack key -> (VllmSpec attribute, expected type)
    "maxModelLen": ("max_model_len", "integer"),
    "gpuMemoryUtilization": ("gpu_memory_utilization", "number"),
    "maxNumSeqs": ("max_num_seqs", "integer"),
    "dtype": ("dtype", "string"),
    "enablePrefixCaching": ("enable_prefix_caching", "boolean"),
    "architecture": ("architecture", "string"),
    "numKvHeads": ("num_kv_heads", "integer"),
    "qkvBias": ("qkv_bias", "boolean"),
    "checkpointDtype": ("checkpoint_dtype", "string"),
    "timePerOutputTokenSeconds": ("time_per_output_token_s", "number"),
}
"""The keys of a model entry's ``vllm`` block: vLLM's engine arguments (camel-cased), the checkpoint facts and the
slowest pace its answers are given time for (the gateway's deadline)."""
MAX_TIME_PER_OUTPUT_TOKEN_S = 10.0
"""``vllm.timePerOutputTokenSeconds`` above this is a unit slip (milliseconds written as seconds)."""
VLLM_CHECKPOINT_DTYPES = ("float16", "bfloat16", "float32")
"""``config.json`` ``torch_dtype`` values a checkpoint is published in."""


def _vllm_block(value: Any) -> list[tuple[str, str]]:
    """Each key of the ``vllm`` block known and of its type; the values' ranges are vLLM's own rules
    (:mod:`tritonft.engines.vllm.rules`), checked with the model (``vllm-engine-rules``)."""
    problems: list[tuple[str, str]] = []
    for key, item in value.items():
        if key not in VLLM_FIELDS:
            close = difflib.get_close_matches(str(key), VLLM_FIELDS, n=1, cutoff=0.6)
            hint = f"did you mean `{close[0]}`?" if close else f"known: {', '.join(VLLM_FIELDS)}"
            problems.append((f".{key}", f"unknown key; {hint}"))
            continue
        kind = VLLM_FIELDS[key][1]
        if kind == "integer":
            ok = isinstance(item, int) and not isinstance(item, bool)
        elif kind == "number":
            ok = isinstance(item, int | float) and not isinstance(item, bool)
        elif kind == "boolean":
            ok = isinstance(item, bool)
        else:
            ok = isinstance(item, str) and bool(item)
        if not ok:
            problems.append((f".{key}", f"must be {'a' if kind != 'integer' else 'an'} {kind}, got {item!r}"))
        elif key == "dtype" and item not in DTYPES:
            problems.append((f".{key}", f"{item!r} is not one of vLLM's dtypes: {', '.join(DTYPES)}"))
        elif key == "timePerOutputTokenSeconds" and not 0 < item <= MAX_TIME_PER_OUTPUT_TOKEN_S:
            problems.append(
                (f".{key}", f"{item!r} must be in (0, {MAX_TIME_PER_OUTPUT_TOKEN_S:g}] seconds per generated token")
            )
        elif key == "checkpointDtype" and item not in VLLM_CHECKPOINT_DTYPES:
            problems.append((f".{key}", f"{item!r} is not one of {', '.join(VLLM_CHECKPOINT_DTYPES)}"))
        elif key == "architecture" and item not in ARCHITECTURES:
            problems.append(
                (f".{key}", f"{item!r} is not an architecture served through vLLM here: {', '.join(ARCHITECTURES)}")
            )
    return problems


_IAM_PRINCIPAL = re.compile(r"^arn:aws[a-z-]*:(iam|sts)::\d{12}:(role|user|assumed-role)/[\w+=,.@/-]+$")
ALERT_RECEIVER_CONFIGS = (
    "email_configs",
    "msteams_configs",
    "opsgenie_configs",
    "pagerduty_configs",
    "pushover_configs",
    "slack_configs",
    "sns_configs",
    "telegram_configs",
    "victorops_configs",
    "webex_configs",
    "webhook_configs",
    "wechat_configs",
    "discord_configs",
)
"""Alertmanager's receiver integrations (its configuration reference)."""


def _ipv4_cidr(value: str) -> list[str]:
    try:
        ipaddress.IPv4Network(value, strict=True)
    except ValueError as exc:
        return [f"is not an IPv4 CIDR block ({exc}); e.g. 203.0.113.0/24"]
    return []


def _alert_receivers(value: Any) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    names = [r.get("name") for r in value]
    for i, receiver in enumerate(value):
        at = f"[{i}]"
        name = receiver.get("name")
        if not isinstance(name, str) or not name.strip() or name == "null":
            problems.append((at, "needs a `name` (any but `null`, which the stack keeps for Watchdog)"))
        elif names.count(name) > 1:
            problems.append((at, f"name {name!r} is used more than once; each receiver has its own"))
        problems += [(at + path.removeprefix("[0]"), p) for path, p in credential_file_problems([receiver])]
        unknown = sorted(set(receiver) - {"name", *ALERT_RECEIVER_CONFIGS})
        if unknown:
            problems.append((at, f"unknown field(s) {unknown}; a receiver has `name` and *_configs lists"))
        configs = [k for k in receiver if k in ALERT_RECEIVER_CONFIGS]
        if not configs:
            problems.append(
                (at, "sends nowhere: give at least one of slack_configs, webhook_configs, pagerduty_configs, ...")
            )
        for key in configs:
            if not isinstance(receiver[key], list) or not receiver[key]:
                problems.append((f"{at}.{key}", "must be a non-empty list of Alertmanager integration configs"))
    return problems


def _alert_routing(value: Any) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    for route, target in value.items():
        if route not in ROUTES:
            problems.append(("", f"unknown route {route!r}; the routes are {', '.join(ROUTES)}"))
        elif not isinstance(target, str) or not target or target == "null":
            problems.append((f".{route}", "must name one of alertReceivers (not `null`)"))
    return problems


FORMATS: dict[str, Format] = {
    "dns-label": Format("RFC 1123 label (Kubernetes name)", _strings(kube.dns1123_label), "Bad_Name", "my-name"),
    "dns-subdomain": Format(
        "RFC 1123 subdomain (Kubernetes name)", _strings(kube.dns1123_subdomain), "Bad_Name", "my-name.example"
    ),
    "ingress-host": Format(
        "DNS name (Ingress host)", _strings(kube.ingress_host), "triton_example", "triton.example.com"
    ),
    "label-map": Format(
        "label keys (qualified names) -> label values", _label_map, {"bad key!": "x"}, {"example.com/pool": "gpu"}
    ),
    "api-keys": Format(
        "client -> its keys, each `{name, expires?}` (DNS-label names, `YYYY-MM-DD` dates)",
        api_keys.format_problems,
        {"webapp": [{"name": "Bad_Name"}]},
        {"webapp": [{"name": "default", "expires": "2027-01-31"}, {"name": "k2"}]},
    ),
    "alert-durations": Format(
        "alert name -> Prometheus duration",
        _alert_durations,
        {"TritonQueueSaturated": "15 minutes"},
        {"TritonQueueSaturated": "30m"},
    ),
    "tolerations": Format(
        "Kubernetes tolerations",
        _tolerations,
        [{"key": "a", "operator": "Maybe"}],
        [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    ),
    "quantity": Format("Kubernetes quantity > 0", _strings(_positive_quantity), "0.5x", "1500m"),
    "seconds": Format(
        "seconds > 0, as a number or quantity (`750m` = 0.75 s)", _strings(_positive_seconds), "1s", "750m"
    ),
    "git-sha": Format(
        "full 40-hex commit sha", _strings(_git_sha), "df1b051", "df1b051c49625cf57a3d0d8d3863ed4d13564fe4"
    ),
    "hf-repo": Format("Hugging Face repo id", _strings(_hf_repo), "org/name/extra", "org/name"),
    "email": Format("e-mail address", _strings(_email), "ops at example", "ops@example.com"),
    "host-port": Format("DNS name and port", _strings(_host_port), "redis", "edge-limits.example.com:6379"),
    "digest-ref": Format(
        "image pinned by digest",
        _strings(_regex(_DIGEST_REF, "pinned by digest; use `repo@sha256:<64 hex>` (tags can move under you)")),
        "nvcr.io/acme/triton:latest",
        "registry.example.com/triton@sha256:" + "0" * 64,
    ),
    "base-digests": Format(
        "`repository:tag` -> `sha256:<64 hex>`",
        _base_digests,
        {"nvcr.io/nvidia/tritonserver:23.04-py3": "latest"},
        {"nvcr.io/nvidia/tritonserver:23.04-py3": "sha256:" + "0" * 64},
    ),
    "engine-images": Format(
        "engine (`onnxruntime`, `vllm`) -> image pinned by digest",
        _engine_images,
        {"vllm": "nvcr.io/acme/triton-vllm:latest"},
        {"vllm": "registry.example.com/server-vllm@sha256:" + "0" * 64},
    ),
    "registry": Format(
        "image registry",
        _strings(_regex(_REGISTRY, "an image registry like `registry.example.com:5000/team` (lower-case path)")),
        "registry.example.com/Team Images",
        "registry.example.com:5000/team",
    ),
    "aws-region": Format(
        "AWS region (one pulumi_aws knows)", _strings(aws_names.region_problems), "Oregon", "eu-west-1"
    ),
    "vpc-id": Format("AWS VPC id", _strings(_aws_id("vpc")), "my-vpc", "vpc-0123456789abcdef0"),
    "kms-key-arn": Format(
        "AWS KMS key ARN",
        _strings(
            _regex(_KMS_KEY_ARN, "a KMS key ARN like `arn:aws:kms:<region>:<account>:key/<key id>` (not an alias)")
        ),
        "alias/triton",
        "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
    ),
    "subnet-id": Format(
        "AWS subnet ids",
        _strings(_aws_id("subnet")),
        ["subnet-1"],
        ["subnet-0123456789abcdef0", "subnet-0123456789abcdef1"],
    ),
    "instance-type": Format(
        "EC2 instance type (one pulumi_aws knows)",
        _strings(aws_names.instance_type_problems),
        "m6i-large",
        "m6i.large",
    ),
    "vpc-cidr": Format("IPv4 CIDR /16 to /21", _strings(_vpc_cidr), "10.0.0.0/24", "10.1.0.0/16"),
    "cidr-list": Format("IPv4 CIDR blocks", _strings(_ipv4_cidr), ["203.0.113.7/24"], ["203.0.113.0/24"]),
    "iam-principal": Format(
        "IAM role or user ARNs",
        _strings(_regex(_IAM_PRINCIPAL, "an IAM role or user ARN like `arn:aws:iam::123456789012:role/deploy`")),
        ["deploy-role"],
        ["arn:aws:iam::123456789012:role/deploy"],
    ),
    "alert-routing": Format(
        "route (critical, warning, watchdog) -> receiver name",
        _alert_routing,
        {"page": "oncall"},
        {"critical": "oncall", "warning": "tickets", "watchdog": "deadmansswitch"},
    ),
    "alert-receivers": Format(
        "Alertmanager receivers (`name` + *_configs)",
        _alert_receivers,
        [{"name": "oncall"}],
        [
            {
                "name": "oncall",
                "slack_configs": [{"api_url": "https://hooks.slack.com/services/T/B/X", "channel": "#ml"}],
            }
        ],
    ),
    "k8s-version": Format(
        "Kubernetes minor version",
        _strings(_regex(_K8S_VERSION, "a Kubernetes version like `1.33`")),
        "v1.33.1",
        "1.32",
    ),
    "triton-release": Format(
        "Triton release",
        _strings(_regex(_TRITON_RELEASE, "a Triton container release like `23.04`")),
        "latest",
        "23.04",
    ),
    "cuda-arch": Format(
        "SM versions", _strings(_regex(_CUDA_ARCH, "an SM version like '80' or '90'")), ["8.6"], ["80", "86"]
    ),
    "encoder-labels": Format(
        "at least 2 distinct non-empty names", _encoder_labels, ["positive", "positive"], ["negative", "positive"]
    ),
    "probe-triples": Format(
        "non-empty list of {anchor, closer, farther} sentences",
        _probe_triples,
        [{"anchor": "A man is eating pasta.", "closer": "A man is eating food."}],
        [{"anchor": "A man is eating pasta.", "closer": "A man is eating food.", "farther": "A man rides a horse."}],
    ),
    "probe-labels": Format(
        "text -> expected label", _probe_labels, {"I love it": ""}, {"I love it": "positive", "I hate it": "negative"}
    ),
    "vllm-block": Format(
        "vLLM engine arguments and checkpoint facts",
        _vllm_block,
        {"maxModelLen": "long"},
        {"maxModelLen": 4096, "gpuMemoryUtilization": 0.9, "maxNumSeqs": 64, "dtype": "auto"},
    ),
    "url": Format(
        "http(s) URL",
        _strings(_regex(_URL, "an http(s) URL like `https://auth.example.com/oauth2/auth`")),
        "auth.example.com",
        "https://auth.example.com/oauth2/auth",
    ),
}


@dataclass(frozen=True)
class Knob:
    """One configuration key."""

    key: str
    type: KnobType
    doc: str
    default: Any = None
    """Static default (also declared in ``Pulumi.yaml``); ``None`` = no static default."""
    default_doc: str = ""
    """How the default is chosen when it depends on other keys (shown in the configuration reference)."""
    choices: tuple[str, ...] = ()
    """Allowed values (for integers: their decimal text); for arrays: allowed entries."""
    choices_doc: str = ""
    """Shown in the configuration reference instead of a long list of choices."""
    scope: Scope = "any"
    secret: bool = False
    minimum: int | None = None
    maximum: int | None = None
    unit: str = ""
    """Unit of an integer knob (``GiB``, ``seconds`` ...): named in errors when a value carries a unit suffix."""
    items: Literal["string", "object", "integer"] = "string"
    """Element type of an ``array`` knob."""
    required: bool = False
    format: str = ""
    """Name of a :data:`FORMATS` grammar the value must also follow."""
    max_length: int | None = None

    @property
    def pulumi_type(self) -> str | None:
        """Type for ``Pulumi.yaml``'s typed config, or None where Pulumi's schema cannot express it."""
        if self.type in ("string", "quantity"):
            return "string"
        if self.type in ("integer", "boolean"):
            return self.type
        if self.type == "array" and self.items == "string":
            return "array"
        return None

    def shown_default(self) -> str:
        if self.default_doc:
            return self.default_doc
        if self.default is None:
            return "required" if self.required else "unset"
        return json.dumps(self.default)


def parse_value(knob: Knob, raw: Any) -> tuple[Any, list[tuple[str, str]]]:
    """One raw config value -> (typed value, []) or (None, [(sub-path, problem without the key path)]).

    Scalars may arrive as strings (``pulumi config set`` writes every scalar as one): ``"1"`` is an integer,
    ``"false"`` a boolean, where the knob wants one.
    """
    value, problem = _parse_type(knob, raw)
    if problem is not None:
        return None, [("", problem)]
    if knob.max_length is not None and isinstance(value, str) and len(value) > knob.max_length:
        return None, [("", f"must be at most {knob.max_length} characters, got {len(value)}")]
    if knob.format:
        problems = FORMATS[knob.format].check(value)
        if problems:
            return None, problems
    return value, []


def _parse_type(knob: Knob, raw: Any) -> tuple[Any, str | None]:
    if knob.type in ("array", "object") and isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            want = "a list" if knob.type == "array" else "a mapping"
            return None, f"must be {want} (YAML list/mapping in the stack file), got {raw!r}"
    if knob.type in ("string", "quantity"):
        return _parse_string(knob, raw)
    if knob.type == "boolean":
        text = str(raw).strip().lower()
        if not isinstance(raw, (list, dict)) and text in ("true", "false"):
            return text == "true", None
        return None, f"must be true or false, got {raw!r}"
    if knob.type == "integer":
        return _parse_int(knob, raw)
    if knob.type == "array":
        return _parse_array(knob, raw)
    if not isinstance(raw, dict):
        return None, f"must be a mapping, got {raw!r}"
    return dict(raw), None


def _parse_string(knob: Knob, raw: Any) -> tuple[Any, str | None]:
    if isinstance(raw, (int, float)) and not isinstance(raw, bool):
        raw = str(raw)
    if not isinstance(raw, str) or raw == "" or _is_json_list(raw):
        shown = "a list" if isinstance(raw, list) or _is_json_list(raw) else repr(raw)
        return None, f"must be a non-empty string, got {shown}"
    if knob.choices and raw not in knob.choices:
        return None, _choice_problem(knob, raw)
    return raw, None


def _is_json_list(text: Any) -> bool:
    if not isinstance(text, str) or not text.startswith("["):
        return False
    try:
        return isinstance(json.loads(text), list)
    except json.JSONDecodeError:
        return False


def _choice_problem(knob: Knob, raw: Any) -> str:
    if len(knob.choices) <= 12:
        return f"must be one of {', '.join(knob.choices)}; got {raw!r}"
    close = difflib.get_close_matches(str(raw), knob.choices, n=3, cutoff=0.6)
    hint = (
        f"did you mean {', '.join(close)}?" if close else f"use one of: {knob.choices_doc or ', '.join(knob.choices)}"
    )
    return f"{raw!r} is not a known value; {hint}"


def _parse_array(knob: Knob, raw: Any) -> tuple[Any, str | None]:
    if not isinstance(raw, list):
        return None, f"must be a list, got {raw!r}"
    if knob.items == "string" and not all(isinstance(x, str) for x in raw):
        return None, f"must be a list of strings, got {raw!r}"
    if knob.items == "object" and not all(isinstance(x, dict) for x in raw):
        return None, f"must be a list of mappings, got {raw!r}"
    if knob.items == "integer" and not all(isinstance(x, int) and not isinstance(x, bool) for x in raw):
        return None, f"must be a list of integers, got {raw!r}"
    if knob.choices:
        bad = [x for x in raw if x not in knob.choices]
        if bad:
            return None, f"has unknown entries {bad}; allowed: {', '.join(knob.choices)}"
    return list(raw), None


def _parse_int(knob: Knob, raw: Any) -> tuple[Any, str | None]:
    if isinstance(raw, (bool, list, dict, float)):
        return None, f"must be an integer, got {raw!r}"
    text = str(raw).strip()
    try:
        value = int(text)
    except ValueError:
        unit = _UNIT_SUFFIX.match(text)
        if unit and knob.unit:
            number = text[: unit.start(2)].strip()
            return None, f"is a whole number of {knob.unit}: write {number} (without the unit), not {raw!r}"
        return None, f"must be an integer{f' number of {knob.unit}' if knob.unit else ''}, got {raw!r}"
    if knob.minimum is not None and value < knob.minimum:
        return None, f"must be >= {knob.minimum}, got {value}"
    if knob.maximum is not None and value > knob.maximum:
        return None, f"must be <= {knob.maximum}, got {value}"
    if knob.choices and str(value) not in knob.choices:
        return None, f"must be one of {', '.join(knob.choices)}; got {value}"
    return value, None


ENVIRONMENTS = ("local", "dev", "staging", "prod", "review")
PLATFORMS = ("kubernetes", "aws")
ADDONS = ("envoy-gateway", "ingress-nginx", "cert-manager", "kube-prometheus-stack", "prometheus-adapter", "keda")
EDGES = ("gateway", "ingress")
DATA_TYPES = ("fp32", "fp16", "bf16")
WEIGHT_DTYPES = ("fp32", "fp16")
FAMILIES = ("t5", "gpt2", "gptj", "bert", "llama")
GENERATOR_FAMILIES = ("t5", "gpt2", "gptj")
"""Served by FasterTransformer, on GPUs."""
ENCODER_FAMILIES = ("bert",)
"""Served by ONNX Runtime behind a tokenizer ensemble, on GPU or CPU nodes."""
VLLM_FAMILIES = ("llama",)
"""Served by vLLM through Triton's vLLM backend, on GPUs (the ``vllm`` block of the model entry)."""
ENCODER_TASKS = ("embed", "classify")
POOLINGS = ("mean", "cls")
DEVICES = ("gpu", "cpu")
PROBE_TRIPLE_FIELDS = ("anchor", "closer", "farther")

STACK_KNOBS: tuple[Knob, ...] = (
    # -- where and what kind of environment
    Knob(
        "platform",
        "string",
        "Where the cluster comes from: an existing cluster (`kubernetes`) or EKS built by this stack (`aws`).",
        required=True,
        choices=PLATFORMS,
    ),
    Knob(
        "environment",
        "string",
        "Environment tier; drives safe defaults (TLS/auth on outside `local`, storage protected in `prod`).",
        default="dev",
        choices=ENVIRONMENTS,
    ),
    Knob(
        "namespace",
        "string",
        "Kubernetes namespace for every workload of the stack.",
        default="triton",
        format="dns-label",
    ),
    # -- existing cluster
    Knob(
        "kubeconfig",
        "string",
        "Path to the kubeconfig file (or its content as a secret).",
        scope="kubernetes",
        default_doc="`$KUBECONFIG` or `~/.kube/config`",
    ),
    Knob(
        "kubeContext",
        "string",
        "Context in the kubeconfig to use.",
        scope="kubernetes",
        default_doc="the kubeconfig's current context",
    ),
    Knob(
        "gpuType",
        "string",
        "GPU model of the existing cluster's GPU nodes (sizes memory checks).",
        scope="kubernetes",
        required=True,
        choices=tuple(GPU_MODELS),
    ),
    Knob(
        "gpusPerNode",
        "integer",
        "GPUs on each GPU node of the existing cluster.",
        scope="kubernetes",
        default=1,
        minimum=1,
        maximum=16,
    ),
    Knob(
        "gpuNodeCpus",
        "integer",
        "CPUs of each GPU node of the existing cluster: a vLLM model's server container gets them as its CPU limit "
        "(its request stays 2 + 1 per GPU), so CFS never throttles the engine's loop below what the node has "
        "(on aws: the instance type's vCPUs).",
        scope="kubernetes",
        default_doc="unset: a vLLM server's CPU limit is twice its request, which CFS may throttle under bursts",
        minimum=1,
        maximum=1024,
    ),
    Knob(
        "gpuNodes",
        "integer",
        "GPU nodes of the existing cluster this stack may use, each with `gpusPerNode` GPUs. Stated, the stack "
        "plans on them as an aws stack does on its node group: the models' pods must fit them (`gpu-capacity`), and "
        "a model without room beside its serving version for one more pod rolls in place and is judged only after "
        "the roll (a wrong version fails `up` while it serves), said before `up` (`judged-before-traffic`). A change "
        "judged before traffic needs one more pod's GPUs per model while its candidate is judged.",
        scope="kubernetes",
        default_doc="unset: the cluster's size is not known; every change is judged beside the serving version, and "
        "`up` fails with the scheduler's reason when its candidate finds no free GPU",
        minimum=1,
        maximum=1000,
    ),
    Knob(
        "gpuNodeSelector",
        "object",
        "Node selector that lands pods on GPU nodes (label -> value).",
        default_doc="`{}` (on aws the platform labels and selects its own GPU nodes)",
        scope="kubernetes",
        format="label-map",
    ),
    Knob(
        "gpuTolerations",
        "array",
        "Tolerations for the GPU nodes' taints (Kubernetes toleration objects).",
        items="object",
        default_doc="`nvidia.com/gpu` Exists NoSchedule",
        scope="kubernetes",
        format="tolerations",
    ),
    Knob(
        "cpuNodeSelector",
        "object",
        "Node selector for CPU work (conversion Jobs, the gateway, `device: cpu` encoders); never GPU nodes.",
        default_doc="`{}` (on aws: the system node group)",
        scope="kubernetes",
        format="label-map",
    ),
    Knob(
        "storageClass",
        "string",
        "ReadWriteMany storage class of the model store.",
        default_doc="the cluster default on kubernetes; the EFS class this stack creates on aws",
        format="dns-subdomain",
    ),
    Knob(
        "ingressClass",
        "string",
        "IngressClass of the HTTP and gRPC ingresses.",
        default="nginx",
        format="dns-subdomain",
    ),
    Knob(
        "existingAddons",
        "array",
        "Add-ons the existing cluster already runs (enables ServiceMonitor, certificates, KEDA objects).",
        default=[],
        choices=ADDONS,
        scope="kubernetes",
    ),
    # -- AWS
    Knob("awsRegion", "string", "AWS region of the EKS cluster.", scope="aws", required=True, format="aws-region"),
    Knob(
        "kubernetesVersion",
        "string",
        f"EKS Kubernetes version: one EKS still offers ({minors_span(EKS_VERSIONS)}) that every pinned chart the "
        "stack installs is made for and, when a node group may grow (a `*NodesMax` above its `*NodesMin`), that "
        f"this stack pins a cluster-autoscaler for ({autoscaler_minors_text()}); the settings warn 90 days "
        "before its standard support ends and while it is in extended support (6x the control plane's price).",
        default=DEFAULT_KUBERNETES_VERSION,
        scope="aws",
        format="k8s-version",
    ),
    Knob(
        "eksSupport",
        "string",
        "The cluster's upgrade policy: `standard` (no extended-support billing; when `kubernetesVersion` leaves "
        "standard support EKS upgrades the control plane to the next minor itself, so bump it before) or "
        "`extended` (the minor is kept up to 12 more months at $0.60 instead of $0.10 an hour).",
        default="standard",
        choices=("standard", "extended"),
        scope="aws",
    ),
    Knob(
        "apiEndpoint",
        "string",
        "The Kubernetes API endpoint: `public` (and private, reachable from `apiPublicAccessCidrs`) or `private` "
        "only (then `pulumi up` and CI run from inside the VPC).",
        default="public",
        choices=("public", "private"),
        scope="aws",
    ),
    Knob(
        "apiPublicAccessCidrs",
        "array",
        "Who reaches the public Kubernetes API endpoint (CI runners' and operators' egress CIDRs); prod must state "
        'it (`["0.0.0.0/0"]` written out is a decision the stack states: GitHub-hosted runners have no fixed '
        "addresses; docs/aws.md).",
        default=["0.0.0.0/0"],
        scope="aws",
        format="cidr-list",
    ),
    Knob(
        "adminPrincipalArns",
        "array",
        "IAM roles/users given cluster-admin through EKS access entries (CI's deploy role, operators); the identity "
        "that creates the cluster is admin too, and must not be listed. prod must list at least one (its creator is "
        "CI's deploy role: the operators need their own entry).",
        default=[],
        scope="aws",
        format="iam-principal",
    ),
    Knob(
        "controlPlaneLogRetentionDays",
        "integer",
        "Days the control plane's api/audit/authenticator logs are kept (the log group is created before the cluster).",
        default=90,
        choices=tuple(str(d) for d in LOG_RETENTION_DAYS),
        unit="days",
        scope="aws",
    ),
    Knob(
        "natGateways",
        "string",
        "NAT gateways of the new VPC: `single` or `per-zone` (a zone's loss stops no other zone's egress; "
        "~$33/month each plus $0.045/GB).",
        default_doc="`per-zone` in `prod`, else `single`",
        choices=NAT_MODES,
        scope="aws",
    ),
    Knob(
        "vpcEndpoints",
        "boolean",
        "S3 gateway + ECR api/dkr interface endpoints in the new VPC: image pulls skip the NAT gateway.",
        default=True,
        scope="aws",
    ),
    Knob(
        "protectInfrastructure",
        "boolean",
        "Protect the EKS cluster, the VPC and the ECR repositories from `pulumi destroy`.",
        default_doc="true in `prod`, else false",
        scope="aws",
    ),
    Knob(
        "nodeSsmAccess",
        "boolean",
        "Give the node role SSM's managed policy (Session Manager shells; it can also read any SSM parameter).",
        default=False,
        scope="aws",
    ),
    Knob(
        "gpuQuotaCheck",
        "boolean",
        "Read the account's EC2 GPU vCPU quota (Service Quotas) and refuse `gpuNodesMax` beyond it, before any "
        "resource, naming the number to ask for.",
        default=True,
        scope="aws",
    ),
    Knob(
        "alertReceivers",
        "array",
        "Alertmanager receivers in Alertmanager's format (`name` + `slack_configs`/`webhook_configs`/"
        "`pagerduty_configs`...), routed by `alertRouting`. Credentials from files of Secrets in the monitoring "
        "namespace (`routing_key_file: /etc/alertmanager/secrets/<secret>/<key>`: Alertmanager mounts them); "
        "inline URLs and keys only when the whole value is set with `--secret` (docs/day2.md#paging).",
        items="object",
        scope="aws",
        default_doc="none: alerts go nowhere (an error in `prod`, a warning in `staging`)",
        format="alert-receivers",
    ),
    Knob(
        "alertRouting",
        "object",
        "Which receiver gets what: `critical` (pages), `warning` (tickets), `watchdog` (a dead-man's switch that "
        "pages when the always-firing Watchdog stops arriving: required in `prod`). `info` alerts go nowhere.",
        scope="aws",
        default_doc="`critical`: the first receiver; `warning`: `critical`'s; `watchdog`: none",
        format="alert-routing",
    ),
    Knob(
        "prometheusStorageGiB",
        "integer",
        "Prometheus's EBS volume (gp3, EBS CSI driver): its 15 days of series survive a reschedule.",
        default=50,
        minimum=10,
        maximum=16384,
        unit="GiB",
        scope="aws",
    ),
    Knob(
        "vpcCidr",
        "string",
        "CIDR of the VPC this stack creates (ignored with `subnetIds`).",
        default="10.0.0.0/16",
        scope="aws",
        format="vpc-cidr",
    ),
    Knob(
        "vpcId",
        "string",
        "Existing VPC id (with `subnetIds`).",
        scope="aws",
        default_doc="a new VPC",
        format="vpc-id",
    ),
    Knob(
        "kmsKeyArn",
        "string",
        "Customer-managed KMS key that encrypts the cluster's Kubernetes Secrets (EKS envelope encryption) and the "
        "stack's ECR repositories; its key policy must let the EKS cluster role and ECR use it.",
        scope="aws",
        default_doc="AWS-managed keys",
        format="kms-key-arn",
    ),
    Knob(
        "publicSubnetIds",
        "array",
        "Existing public subnets for internet-facing load balancers (with `vpcId`).",
        default=[],
        scope="aws",
        format="subnet-id",
    ),
    Knob(
        "subnetIds",
        "array",
        "Existing private subnet ids to use instead of creating a VPC.",
        default=[],
        scope="aws",
        format="subnet-id",
    ),
    Knob(
        "gpuInstanceType",
        "string",
        "EC2 instance type of the GPU node group (must be a known GPU type).",
        scope="aws",
        required=True,
        choices=tuple(AWS_GPU_INSTANCES),
        choices_doc="a g4dn, g5, g6, g6e, p3, p3dn, p4d, p4de, p5, p5e or p5en type",
    ),
    Knob(
        "gpuNodesMin",
        "integer",
        "Fewest GPU nodes (the node group's minSize; cluster-autoscaler never goes below). The models' pods at "
        "replicasMin must fit them, or the first `up` waits for scale-up (a warning).",
        default=0,
        minimum=0,
        maximum=1000,
        scope="aws",
    ),
    Knob(
        "gpuNodesMax",
        "integer",
        "Most GPU nodes cluster-autoscaler may add (the node group's maxSize); the models' pods at replicasMax "
        "must fit them. Equal to gpuNodesMin: a fixed-size GPU group.",
        default=2,
        minimum=1,
        maximum=1000,
        scope="aws",
    ),
    Knob("gpuNodesDesired", "integer", "Initial GPU nodes.", default=1, minimum=0, maximum=1000, scope="aws"),
    Knob(
        "gpuNodeDiskGiB",
        "integer",
        "Root disk of each GPU node.",
        unit="GiB",
        minimum=50,
        maximum=16384,
        scope="aws",
        default_doc="sized from the images and the largest model",
    ),
    Knob(
        "gpuAmi",
        "string",
        "GPU node OS: EKS AL2023 NVIDIA or Bottlerocket NVIDIA (bundles the device plugin).",
        default="al2023",
        choices=("al2023", "bottlerocket"),
        scope="aws",
    ),
    Knob(
        "gpuFallbackInstanceTypes",
        "array",
        "More EC2 types for the GPU node group, each with the GPUs of `gpuInstanceType` (same model and count, e.g. "
        "g5.24xlarge beside g5.12xlarge): on-demand nodes are launched as `gpuInstanceType` first and as these, in "
        "order, when a zone is out of it (spot picks among all), so a capacity shortage is not a 40-minute timeout. "
        "The quota check counts `gpuInstanceType`'s vCPUs; a fallback node with more vCPUs takes more of the quota.",
        default=[],
        choices=tuple(AWS_GPU_INSTANCES),
        choices_doc="GPU types with the GPUs of gpuInstanceType",
        scope="aws",
    ),
    Knob(
        "gpuCapacityType",
        "string",
        "On-demand or spot GPU capacity.",
        default="on-demand",
        choices=("on-demand", "spot"),
        scope="aws",
    ),
    Knob(
        "systemInstanceType",
        "string",
        "Instance type of the CPU system node group (controllers, conversion Jobs).",
        default="m6i.2xlarge",
        scope="aws",
        format="instance-type",
    ),
    Knob("systemNodesMin", "integer", "Minimum system nodes.", default=1, minimum=1, maximum=450, scope="aws"),
    Knob("systemNodesMax", "integer", "Maximum system nodes.", default=3, minimum=1, maximum=450, scope="aws"),
    Knob(
        "addons",
        "array",
        "Add-ons this stack installs with pinned Helm charts.",
        default=[],
        choices=ADDONS,
        scope="aws",
    ),
    # -- images
    Knob(
        "serverImage",
        "string",
        "Prebuilt Triton+FT server image, pinned by digest (`repo@sha256:...`); skips the build.",
        default_doc="built by this stack",
        format="digest-ref",
    ),
    Knob(
        "toolsImage",
        "string",
        "Prebuilt tools image (`tritonft` CLI), pinned by digest; skips the build.",
        default_doc="built by this stack",
        format="digest-ref",
    ),
    Knob(
        "engineImages",
        "object",
        "Prebuilt server images of the engines whose image is not FasterTransformer's, by engine (`onnxruntime`: "
        "the encoders'; `vllm`: the vLLM models'), each pinned by digest; an engine given here is not built by the "
        "stack. The deploy workflow sets all of them from the images it built once (`.github/scripts/"
        "stack-config.sh`); an entry for an engine the stack's models do not use is ignored.",
        default_doc="`{}` (each engine in use built by this stack)",
        format="engine-images",
    ),
    Knob(
        "baseImageDigests",
        "object",
        "Digests of the base images the stack's builds pull (`repository:tag` as the Dockerfile names it -> "
        "`sha256:...`), for the bases the repository does not pin itself (NGC's Triton releases, uv): each build "
        "gets `<ARG>=<repository:tag>@<digest>`. A prod build refuses a base left a tag alone.",
        default_doc="`{}` (only the Dockerfiles' own pins)",
        format="base-digests",
    ),
    Knob(
        "imageRegistry",
        "string",
        "Registry to push built images to on `kubernetes` (on `aws`: an ECR repository of this stack).",
        scope="kubernetes",
        default_doc="required unless both images are prebuilt",
        format="registry",
    ),
    Knob(
        "tritonVersion",
        "string",
        "Triton container release the server image builds on.",
        default=TRITON_VERSION,
        format="triton-release",
    ),
    Knob(
        "ftBackendCommit",
        "string",
        "fastertransformer_backend commit built into the server image.",
        default=FT_BACKEND_COMMIT,
        format="git-sha",
    ),
    Knob(
        "ftCommit",
        "string",
        "FasterTransformer commit the backend is built against.",
        default=FT_COMMIT,
        format="git-sha",
    ),
    Knob(
        "cudaArchs",
        "array",
        "CUDA SM architectures compiled into FasterTransformer.",
        default=list(DEFAULT_CUDA_ARCHS),
        format="cuda-arch",
    ),
    # -- storage
    Knob(
        "storageSizeGiB",
        "integer",
        "Size of the model store's claim; never derived from the models, so adding one does not touch the claim. "
        "On EFS the number is nominal (EFS grows with the bytes stored); on any other class the models' converted "
        "bytes x (1 + headroom) must fit in it (checked before anything is created).",
        unit="GiB",
        minimum=1,
        maximum=65536,
        default_doc="100",
    ),
    Knob(
        "storageHeadroomPercent",
        "integer",
        "Extra room in the model store over the converted weights (100 = room for one re-conversion).",
        default=100,
        minimum=0,
        maximum=400,
        unit="percent",
    ),
    Knob(
        "protectStorage",
        "boolean",
        "Protect the model store from `pulumi destroy`.",
        default_doc="true in `prod`, else false",
    ),
    # -- models
    Knob("models", "array", "The models to serve (see *Model entries*).", items="object", required=True),
    # -- serving
    Knob("replicasMin", "integer", "Minimum Triton replicas.", default=1, minimum=0, maximum=1000),
    Knob("replicasMax", "integer", "Maximum Triton replicas.", default=1, minimum=1, maximum=1000),
    Knob(
        "ingressHost",
        "string",
        "Base DNS name of the endpoints: each model is served at `<model>.<ingressHost>` (HTTP under `/v2`, "
        "gRPC on the same host), the OpenAI gateway at `<ingressHost>/v1`.",
        default_doc="`<stack>.triton.local`",
        format="ingress-host",
    ),
    Knob(
        "edge",
        "string",
        "How clients reach the stack: `gateway` (Gateway API routes on Envoy Gateway; only the OpenAI gateway and "
        "Triton's inference routes are exposed) or `ingress` (Ingresses for an existing ingress-nginx).",
        choices=EDGES,
        default_doc="`gateway` on aws, `ingress` on kubernetes",
    ),
    Knob(
        "gatewayName",
        "string",
        "The existing cluster's own Gateway the routes attach to (`edge: gateway` on kubernetes).",
        default_doc="unset: the stack makes its Gateway `<stack>-edge`",
        format="dns-subdomain",
        scope="kubernetes",
    ),
    Knob(
        "gatewayNamespace",
        "string",
        "Namespace of `gatewayName` (its listeners must allow routes from the stack's namespace).",
        default_doc="the stack's namespace",
        format="dns-label",
        scope="kubernetes",
    ),
    Knob(
        "apiClients",
        "array",
        "Clients that get their own API key (`ingressAuth: apiKey`); the probe always gets one (`probe`). Read the "
        "keys with `pulumi stack output apiKeys --show-secrets`.",
        default=[],
        format="dns-label",
    ),
    Knob(
        "apiKeys",
        "object",
        "The keys each client of `apiClients` holds, when not just its first (`default`): by client, a list of "
        "`{name, expires}`. A listed client holds exactly these: add a key beside the old one (both work: the "
        "overlap), leave one out to revoke it alone; `expires: YYYY-MM-DD` (UTC) is the first day the key is "
        "refused (each `up` from then on drops it; plans warn 14 days ahead). A key's id, in the Secret, the "
        "`apiKeys` output and the access log's `client=`, is `<client>` for `default`, else `<client>.<name>` "
        "(docs/security/api-keys.md).",
        default_doc="none: each client holds one key, `default`, that never expires",
        format="api-keys",
    ),
    Knob(
        "apiKeyRotation",
        "integer",
        "Change it (e.g. add one) to replace every API key on the next `up`, the probe's included (no overlap: for "
        "one client's key with an overlap, use `apiKeys`).",
        default=0,
        minimum=0,
        maximum=1000000,
    ),
    Knob(
        "rateLimitPerMinute",
        "integer",
        "Requests a minute each API key may send (per Envoy replica and per route), beyond which the edge answers 429.",
        default=600,
        minimum=1,
        maximum=1000000,
    ),
    Knob(
        "rateLimitRedis",
        "string",
        "A Redis (`<host>:<port>`, e.g. an ElastiCache endpoint the cluster reaches) where Envoy Gateway's rate-limit "
        "service keeps the edge's counters: each API key then has one bucket of `rateLimitPerMinute` for the whole "
        "stack, shared by every route and proxy replica (Envoy Gateway's global limit; a Redis that does not answer "
        "lets requests through). Unset: a bucket per route and proxy replica.",
        default_doc="unset: local buckets",
        format="host-port",
        scope="aws",
    ),
    Knob(
        "maxConcurrentRequests",
        "integer",
        "Requests the edge's proxies send to one backend (the OpenAI gateway, an encoder's Triton) at once, per proxy "
        "replica; as many again wait, beyond that the edge answers 503 at once (Envoy's circuit breaker). For every "
        "client together: Envoy Gateway has no per-client concurrency limit.",
        default=256,
        minimum=1,
        maximum=100000,
    ),
    Knob(
        "maxConcurrentPerClient",
        "integer",
        "Requests one API client (its keys together) may have in flight at once at each OpenAI gateway replica, "
        "streams included; one more is answered 429 with `Retry-After` and an error naming this key "
        "(`maxConcurrentRequests` is for every client together). Requests that did not pass the API-key edge "
        "(in-cluster callers) are not counted. Only with `edge: gateway` and `ingressAuth: apiKey`; not for an "
        "encoder's own routes, which reach Triton without the gateway.",
        default_doc="`maxConcurrentRequests` / (2 x `gatewayReplicasMax`), at least 1 (256 / 8 = 32): even at the "
        "gateway's most replicas, one client holds at most half of a proxy's slots",
        minimum=1,
        maximum=100000,
    ),
    Knob("ingressTls", "boolean", "Serve the edge over TLS.", default_doc="false in `local`, else true"),
    Knob(
        "dnsZone",
        "string",
        "The Route53 public hosted zone holding `ingressHost` (looked up, never created): external-dns keeps a "
        "record there for every host of the edge, and removes the ones it made when their routes go.",
        default_doc="required on aws",
        format="ingress-host",
        scope="aws",
    ),
    Knob(
        "acmeEmail",
        "string",
        "Contact e-mail of the ACME account: on aws the stack then makes the ClusterIssuer `tlsIssuer` (Let's "
        "Encrypt's production directory in every environment, whose certificates the probes and clients trust; "
        "HTTP-01 through the edge).",
        default_doc="unset: no issuer is made",
        format="email",
        scope="aws",
    ),
    Knob(
        "tlsIssuer",
        "string",
        "cert-manager ClusterIssuer that signs the edge's certificates.",
        default_doc="with `acmeEmail`: `letsencrypt-prod` (every environment); otherwise unset: use `tlsSecretName`",
        format="dns-subdomain",
    ),
    Knob(
        "tlsSecretName",
        "string",
        "Existing TLS Secret for the ingresses (when no issuer); its certificate covers `*.<ingressHost>`, and "
        "`<ingressHost>` too when the gateway is on.",
        default_doc="`<namespace>-triton-tls`",
        format="dns-subdomain",
    ),
    Knob(
        "ingressAuth",
        "string",
        "Authentication at the edge: `apiKey` (keys the stack generates, sent as `Authorization: Bearer`; "
        "`edge: gateway`), `basic` or `oidc` (`edge: ingress`), or `none`.",
        choices=("none", "apiKey", "basic", "oidc"),
        default_doc="`none` in `local`, else `apiKey` with `edge: gateway` and `basic` with `edge: ingress`",
    ),
    Knob(
        "basicAuthSecretName",
        "string",
        "Existing Secret (key `auth`, htpasswd lines) for basic auth, instead of `ingressHtpasswd`.",
        default_doc="created from `ingressHtpasswd`",
        format="dns-subdomain",
    ),
    Knob(
        "oidcAuthUrl", "string", "OIDC auth URL (oauth2-proxy `/oauth2/auth`) when `ingressAuth: oidc`.", format="url"
    ),
    Knob("oidcSigninUrl", "string", "OIDC sign-in URL when `ingressAuth: oidc`.", format="url"),
    Knob("autoscaling", "boolean", "Scale replicas on Triton's queue-time / compute-time ratio.", default=True),
    Knob(
        "autoscaleTargetRatio",
        "quantity",
        "Target average queue:compute ratio per pod (Kubernetes quantity).",
        default="500m",
        format="quantity",
    ),
    Knob(
        "autoscaleTargetTtftSeconds",
        "quantity",
        "vLLM models (`family: llama`): the time-to-first-token p95 objective, in seconds (Kubernetes quantity: "
        "`750m` is 0.75 s). Their `VllmTimeToFirstTokenHigh` alert fires when the service stays above it, and their "
        "dashboard draws it (they scale on `autoscaleTargetWaitingRequests`).",
        default="1",
        format="seconds",
    ),
    Knob(
        "autoscaleTargetWaitingRequests",
        "quantity",
        "vLLM models (`family: llama`): target requests waiting inside vLLM per pod (`vllm:num_requests_waiting`, "
        "the queue of requests beyond `vllm.maxNumSeqs`; Kubernetes quantity). Their HPA (or KEDA) scales on it "
        "instead of the queue:compute ratio (requests wait inside vLLM, not in Triton's queue).",
        default="2",
        format="quantity",
    ),
    Knob(
        "scaleDownStabilizationSeconds",
        "integer",
        "HPA scale-down stabilization window (scale-up is immediate; cold starts take minutes).",
        default_doc="max(600, 2 x (startup budget + node scale-up)), at most 3600",
        minimum=60,
        maximum=3600,
        unit="seconds",
    ),
    Knob(
        "scaleToZero",
        "boolean",
        "Autoscale with a KEDA ScaledObject (the queue:compute ratio, plus the request rate through the model's "
        "ingress and the OpenAI gateway) instead of an HPA; with `replicasMin: 0` the model scales to zero when "
        "idle and the next request wakes it (answered 503 with `Retry-After` meanwhile).",
        default=False,
    ),
    Knob(
        "monitoring",
        "boolean",
        "ServiceMonitor, PrometheusRule and Grafana dashboard.",
        default_doc="true when kube-prometheus-stack is installed or present",
    ),
    Knob(
        "alertFor",
        "object",
        "How long each alert's condition must hold before it fires (its `for:`), by alert name; unnamed alerts "
        "keep their default. Shorter pages sooner and on briefer trouble.",
        default_doc=", ".join(f"`{name}: {duration}`" for name, duration in ALERT_FOR.items()),
        format="alert-durations",
    ),
    Knob(
        "loadBandwidthMiBps",
        "integer",
        "Weight load bandwidth from the store assumed by the startup budget (47 MiB/s: under the ~50 MB/s one "
        "client reads from EFS/NFS, components/common/sizing.py); raise it only for a faster store you have measured.",
        default=47,
        minimum=1,
        maximum=100000,
        unit="MiB/s",
    ),
    Knob(
        "gemmTuning",
        "boolean",
        "Run FasterTransformer's GEMM autotuning (`t5_gemm` / `gpt_gemm`, seed 000's step 3) in an init container "
        "of each Triton pod, on its GPUs, before Triton loads the model; the resulting `gemm_config.in` is cached "
        "on the model store per GPU product and model shape, so later replicas and restarts reuse it. A failed "
        "or timed-out tuning falls back to FT's default GEMM algorithms (logged, never blocking serving). Off: "
        "FT always uses cuBLAS's default algorithms.",
        default_doc="false in `local`, else true",
    ),
    Knob(
        "gemmTuningTimeoutSeconds",
        "integer",
        "Longest the GEMM tuning may run before the pod falls back to FT's defaults; added (plus 60 s) to the "
        "Deployment's progress deadline and to how long `pulumi up` waits for the rollout.",
        default=900,
        minimum=60,
        maximum=7200,
        unit="seconds",
    ),
    # -- judged promotion: the weighted (canary) phase
    Knob(
        "canary",
        "boolean",
        "After a new serving version of a model (new revision, dtype, TP, server image) has been judged by the "
        "probe, give it `canaryWeightPercent`% of the model's traffic on the Gateway API edge (weighted "
        "`backendRefs` of its HTTPRoute and GRPCRoute) for `canaryDurationSeconds`, then compare its error ratio "
        "and latency p95 with the stable version's in Prometheus (Triton's own per-pod metrics). It is promoted "
        "only when both pass; otherwise `up` fails naming the metric, both values and the threshold, with the "
        "stable version serving 100%. Needs `edge: gateway`, `monitoring` and `probe`. Off: the judged version "
        "takes all traffic at once.",
        default=False,
    ),
    Knob(
        "canaryWeightPercent",
        "integer",
        "Share of the model's edge traffic the judged candidate takes during the weighted phase (the OpenAI "
        "gateway's calls keep going to the stable version).",
        default=10,
        minimum=1,
        maximum=50,
        unit="percent",
    ),
    Knob(
        "canaryDurationSeconds",
        "integer",
        "How long the weighted phase lasts before its figures are compared (the window of the Prometheus queries).",
        default=300,
        minimum=30,
        maximum=3600,
        unit="seconds",
    ),
    Knob(
        "canaryMaxErrorRatioIncreasePercent",
        "integer",
        "Percentage points by which the candidate's error ratio (Triton's failed / all requests of the model in "
        "the phase) may exceed the stable's.",
        default=1,
        minimum=0,
        maximum=100,
        unit="percent",
    ),
    Knob(
        "canaryMaxLatencyIncreasePercent",
        "integer",
        "How much the candidate's latency p95 (Triton's request-duration summary, worst pod, averaged over the "
        "phase) may exceed the stable's, in percent of the stable's.",
        default=20,
        minimum=0,
        maximum=1000,
        unit="percent",
    ),
    Knob(
        "canaryMinRequests",
        "integer",
        "Requests the candidate must answer during the phase for the comparison to count; fewer fails `up` as "
        "inconclusive (raise `canaryDurationSeconds` or `canaryWeightPercent` for a quiet model, or lower this).",
        default=50,
        minimum=0,
        maximum=1000000,
    ),
    Knob(
        "canaryPrometheusUrl",
        "string",
        "Prometheus that `pulumi up` asks for the phase's figures.",
        default_doc="unset: kube-prometheus-stack's Prometheus in `monitoring`, through the Kubernetes API's "
        "service proxy (the stack's kubeconfig)",
        format="url",
    ),
    # -- OpenAI-compatible gateway
    Knob(
        "gateway",
        "boolean",
        "Serve every model through the OpenAI-compatible API (`tritonft gateway`) under `/v1` on `ingressHost`, "
        "with the same TLS and authentication as the models' endpoints; the integration probe checks it too.",
        default=True,
    ),
    Knob("gatewayReplicasMin", "integer", "Fewest gateway replicas.", default=2, minimum=1, maximum=100),
    Knob(
        "gatewayReplicasMax",
        "integer",
        "Most gateway replicas; above `gatewayReplicasMin`, an HPA scales on CPU (70% of the request; needs the "
        "resource metrics API, e.g. metrics-server).",
        default=4,
        minimum=1,
        maximum=100,
    ),
    Knob(
        "gatewayCpu",
        "quantity",
        "CPU request and limit of each gateway pod (one event loop per pod: more than 1 core goes unused).",
        default="1",
        format="quantity",
    ),
    Knob(
        "gatewayMemory", "quantity", "Memory request and limit of each gateway pod.", default="512Mi", format="quantity"
    ),
    Knob(
        "gatewayDeadlineSeconds",
        "integer",
        "Longest a request through the gateway may take before it answers 504; a vLLM model's requests get this "
        "plus their longest answer (its context x `vllm.timePerOutputTokenSeconds`), and the proxies in front of "
        "the gateway allow the longest of them. It is also a vLLM model's first-token deadline: its engine, with "
        "requests and no token for this long (in 10-second probes, at least 40 s), is restarted by the pod's "
        "livenessProbe.",
        default=60,
        minimum=1,
        maximum=300,
        unit="seconds",
    ),
    Knob(
        "gatewayCoalesce",
        "boolean",
        "Send concurrent greedy or seeded completions of a model with the same parameters to Triton as one batched "
        "call (`tritonft gateway --coalesce`; off: one call per prompt).",
        default=True,
    ),
    # -- probe
    Knob(
        "probe",
        "boolean",
        "Run the integration probe during `pulumi up` (fails the update when the model does not answer).",
        default=True,
    ),
    Knob(
        "verifyGeneration",
        "boolean",
        "Check in the conversion Job what the converted files generate (`tritonft verify --generate`: the CPU "
        "reference must pass the probe's judgement) before they are published; done when the model fits the Job's "
        "memory cap (8 GiB), skipped for larger ones. For an encoder: ONNX Runtime's answers to the probe's texts "
        "must pass its judgement (width, unit norm, similarity order; a classifier's labels).",
        default=True,
    ),
    Knob("probeProtocol", "string", "Protocol the probe uses.", default="grpc", choices=("http", "grpc")),
    Knob("probeRequests", "integer", "Requests the probe times for p50/p95.", default=20, minimum=1, maximum=10000),
    Knob(
        "probeTimeoutSeconds",
        "integer",
        "Overall probe deadline.",
        default=900,
        minimum=10,
        maximum=86400,
        unit="seconds",
    ),
    Knob(
        "probeBleuThreshold", "integer", "Minimum BLEU of T5 translation samples.", default=15, minimum=0, maximum=100
    ),
    # -- secrets
    Knob("hfToken", "string", "Hugging Face token for gated/private repos (set with `--secret`).", secret=True),
    Knob(
        "ingressHtpasswd",
        "string",
        "htpasswd lines for basic auth (set with `--secret`).",
        secret=True,
        default_doc="required when `ingressAuth: basic` and no existing secret",
    ),
)

MODEL_KNOBS: tuple[Knob, ...] = (
    Knob(
        "name",
        "string",
        "Model name in Triton and Kubernetes (RFC 1123 label, at most 40 characters: it prefixes object names).",
        required=True,
        format="dns-label",
        max_length=40,
    ),
    Knob("hfRepo", "string", "Hugging Face repository id.", required=True, format="hf-repo"),
    Knob(
        "revision",
        "string",
        "Pinned commit of the repository: the full 40-hex sha (never a branch, tag or abbreviated sha).",
        required=True,
        format="git-sha",
    ),
    Knob(
        "family",
        "string",
        "Model family, which picks the engine: the generators `t5`, `gpt2`, `gptj` (FasterTransformer, on GPUs), "
        "the encoder `bert` (BERT architecture: BERT, MiniLM, all-MiniLM, BGE, E5; ONNX Runtime behind a tokenizer "
        "ensemble, on GPU or CPU nodes; see *Encoders in a stack*) or `llama` (Llama 2/3.x, Mistral, Qwen2/2.5/3, "
        "Gemma, Phi-3: vLLM through Triton's vLLM backend, on GPUs; see *Llama-family models in a stack*).",
        choices=FAMILIES,
        default_doc="from the catalog of known repos",
    ),
    Knob(
        "architecture",
        "object",
        "Shape of a model not in the catalog: `dModel`, `numHeads`, `numLayers`, "
        "`dFf`, `vocabSize` (+ `dKv`, `numDecoderLayers`, `maxPositions`, `gatedFfn`, `tiedEmbeddings`); "
        "`bert` and the GPT families need `maxPositions` too (their position tables).",
        default_doc="from the catalog",
    ),
    Knob(
        "weightDtype",
        "string",
        "Element type of the converted weights: FasterTransformer's `.bin` files; for `bert` the ONNX graph's weights "
        "and so its compute type (`tritonft convert --dtype`; on a GPU `fp16` runs the TensorRT accelerator in FP16).",
        choices=WEIGHT_DTYPES,
        default_doc="`fp16`; `fp32` for a model on `device: cpu` (CPUs compute fp16 slowly)",
    ),
    Knob(
        "dataType",
        "string",
        "Runtime compute type of FasterTransformer on the GPU (generators only: an encoder computes in its graph's "
        "`weightDtype`).",
        default="fp16",
        choices=DATA_TYPES,
    ),
    Knob(
        "tensorParallel",
        "integer",
        "GPUs one replica's tensors are split over (generators; for `llama` vLLM's `tensor_parallel_size`; an "
        "encoder takes 1).",
        default=1,
        choices=("1", "2", "4", "8"),
    ),
    Knob(
        "pipelineParallel",
        "integer",
        "Pipeline stages (generators; an encoder takes 1).",
        default=1,
        minimum=1,
        maximum=8,
    ),
    Knob("maxBatchSize", "integer", "Triton max_batch_size.", default=8, minimum=1, maximum=1024),
    Knob(
        "maxQueueDelayUs",
        "integer",
        "Dynamic batching queue delay of the FT step (0: requests queued while the step is busy are still batched; "
        "a lone request does not wait).",
        default=0,
        minimum=0,
        maximum=10_000_000,
        unit="microseconds",
    ),
    Knob("preferredBatchSizes", "array", "Dynamic batching preferred sizes.", default=[], items="integer"),
    Knob(
        "maxInputLen",
        "integer",
        "Longest prompt in tokens (generators; an encoder's limit is `maxSeqLength`).",
        default=512,
        minimum=1,
        maximum=32768,
    ),
    Knob(
        "maxOutputLen", "integer", "Longest generation in tokens (generators).", default=128, minimum=1, maximum=32768
    ),
    Knob("streaming", "boolean", "Decoupled (streaming) mode (generators).", default=False),
    Knob("int8Mode", "integer", "Weight-only int8 (GPT-2 only).", default=0, minimum=0, maximum=1),
    Knob("instances", "integer", "Triton model instances per replica.", default=1, minimum=1, maximum=8),
    Knob(
        "device",
        "string",
        "Where one replica runs: `gpu` (one GPU per encoder replica; TP x PP GPUs per generator replica) or `cpu` "
        "(encoders only, no GPU: CPU nodes, Triton's ONNX Runtime backend on the CPU; FasterTransformer needs GPUs).",
        default="gpu",
        choices=DEVICES,
    ),
    Knob(
        "task",
        "string",
        "`bert` only: what the encoder answers, a sentence `embed`ding (`/v1/embeddings`) or a `classify` label "
        "with its scores (KServe V2).",
        choices=ENCODER_TASKS,
        default_doc="`embed` (family `bert`)",
    ),
    Knob(
        "pooling",
        "string",
        "`task: embed` only: the sentence vector is the `mean` of the token vectors under the mask or the first "
        "(`cls`) token's; must be the checkpoint's (its `1_Pooling/config.json`).",
        choices=POOLINGS,
        default_doc="`mean`, or the catalog's (all-MiniLM-L6-v2: mean)",
    ),
    Knob(
        "normalize",
        "boolean",
        "`task: embed` only: L2-normalise the embeddings (the checkpoint's `Normalize` module).",
        default_doc="`true`, or the catalog's (all-MiniLM-L6-v2: true)",
    ),
    Knob(
        "labels",
        "array",
        "`task: classify` only, and required there: the class names by logit index (the checkpoint's `id2label`).",
        format="encoder-labels",
        default_doc="required with `task: classify`",
    ),
    Knob(
        "maxSeqLength",
        "integer",
        "`bert` only: longest input in tokens, special tokens included (longer texts are refused, never "
        "truncated); at most `architecture.maxPositions`.",
        minimum=2,
        maximum=8192,
        unit="tokens",
        default_doc="`min(512, architecture.maxPositions)`, or the catalog's (all-MiniLM-L6-v2: 256, from its "
        "sentence_bert_config.json)",
    ),
    Knob(
        "probeSimilar",
        "array",
        "`task: embed` only: what the probe asks of the served embeddings, a list of `{anchor, closer, farther}` "
        "sentences: `closer` must lie nearer to `anchor` (cosine) than `farther`.",
        items="object",
        format="probe-triples",
        default_doc="`tritonft.probe.encoder.DEFAULT_TRIPLES` (the probe's own: pasta/food/horse ...)",
    ),
    Knob(
        "probeLabels",
        "object",
        "`task: classify` only: text -> the label the probe expects the served classifier to answer (each one of "
        "`labels`).",
        format="probe-labels",
        default_doc="unset: the probe checks the labels and scores' shape only",
    ),
    Knob(
        "hfTokenSecret",
        "string",
        "An existing Kubernetes Secret (in the stack's namespace, key `token`) holding the Hugging Face token this "
        "model's download Job uses (a gated or private repository), instead of the stack's `hfToken` secret; "
        "mounted as a file, never an environment variable.",
        format="dns-subdomain",
        default_doc="the stack's `hfToken` secret when set, else none",
    ),
    Knob(
        "vllm",
        "object",
        "`llama` only: vLLM's engine arguments (its `model.json`) and the checkpoint facts vLLM's rules need. "
        "Engine: `maxModelLen` (tokens, prompt + answer; unset: the model's own positions, RoPE-scaled), "
        "`gpuMemoryUtilization` (0 < x <= 1, default 0.9), `maxNumSeqs` (requests run at once, default 64), "
        "`dtype` (auto, half, float16, bfloat16, float, float32; default auto: the checkpoint's), "
        "`enablePrefixCaching` (default true); the tensor-parallel size is the entry's `tensorParallel`. "
        "Checkpoint (from the catalog for a known `hfRepo`, else from its `config.json`): `architecture` "
        "(`architectures[0]`, e.g. LlamaForCausalLM), `numKvHeads` (`num_key_value_heads`), `qkvBias`, "
        "`checkpointDtype` (`torch_dtype`). Deadline: `timePerOutputTokenSeconds` (default 0.05), the slowest pace "
        "an answer is given time for: the gateway's deadline for the model's requests is `gatewayDeadlineSeconds` + "
        "its context (`maxModelLen`) x this, and the proxies in front of the gateway and the model's pods' drain "
        "follow it.",
        format="vllm-block",
        default_doc="the engine defaults above; the catalog's checkpoint facts",
    ),
)

ARCHITECTURE_FIELDS = {
    "dModel": "d_model",
    "numHeads": "num_heads",
    "numLayers": "num_layers",
    "dFf": "d_ff",
    "vocabSize": "vocab_size",
    "dKv": "d_kv",
    "numDecoderLayers": "num_decoder_layers",
    "maxPositions": "max_positions",
    "gatedFfn": "gated_ffn",
    "tiedEmbeddings": "tied_embeddings",
}
ARCHITECTURE_REQUIRED = ("dModel", "numHeads", "numLayers", "dFf", "vocabSize")

_PATH = re.compile(r"^(?P<key>\w+)(\[\d+\])?(\.(?P<sub>[\w-]+)(\[\d+\])?(\.(?P<field>\w+))?)?$")


def schema_path(path: str) -> bool:
    """Whether ``path`` (as a message names it) is a stack key, an item of one, or a model-entry key path.

    ``vpcCidr``, ``subnetIds[1]``, ``models[2].maxInputLen``, ``models[0].architecture.dModel``,
    ``models[1].probeSimilar[0].anchor``, ``apiKeys.webapp[0].expires`` are; internal names
    such as ``network.vpcCidr`` are not.
    """
    match = _PATH.match(path)
    if match is None:
        return False
    key, sub, fieldname = match.group("key", "sub", "field")
    if key not in {k.key for k in STACK_KNOBS}:
        return False
    if sub is None:
        return fieldname is None
    if key == "apiKeys":  # by client name: its list of keys, one key, or a field of one
        return fieldname is None or fieldname in api_keys.KEY_FIELDS
    if key != "models" or sub not in {k.key for k in MODEL_KNOBS}:
        return False
    if sub == "probeSimilar":
        return fieldname is None or fieldname in PROBE_TRIPLE_FIELDS
    if sub == "vllm":
        return fieldname is None or fieldname in VLLM_FIELDS
    return fieldname is None or (sub == "architecture" and fieldname in ARCHITECTURE_FIELDS)
