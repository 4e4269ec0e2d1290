"""ModelConversion: one model's download -> convert -> repo Job on CPU nodes, keyed by content (and, for a
T5/GPT-2/GPT-J model, its judge's reference Job beside it).

The Job's name carries the conversion key (repo, revision, dtype, TP, family, converter version) and the
repository key (every serving knob), so an unchanged model keeps its finished Job and nothing runs, while a changed
one gets a new Job (Jobs are immutable; a new name is a replacement, not an update). ``pulumi up`` waits for the
Job to complete, with a timeout scaled from the model's size, before the TritonService that depends on it rolls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.common.layout import (
    ModelPaths,
    as_input,
    conversion_job_name,
    dns_label,
    labels,
    model_paths,
    object_meta,
    reference_job_name,
    selector,
)
from components.common.sizing import DOWNLOAD_BANDWIDTH, JobSizing, job_sizing, judge_reference_job_sizing
from components.common.target import ClusterTarget
from components.models.conversion_spec import (
    HF_TOKEN_KEY,
    SPEC_FILE,
    ConversionPod,
    conversion_network_policy_spec,
    conversion_pod_spec,
    writable_dirs,
)
from components.models.store import ModelStore
from tritonft.errors import UserError
from tritonft.spec import ModelSpec


@dataclass(frozen=True)
class ModelConversionArgs:
    """One model to put into the store."""

    target: ClusterTarget
    store: ModelStore
    model: ModelSpec
    tools_image: pulumi.Input[str]
    """The tools image (``tritonft`` CLI), pinned by digest."""
    converter_version: str
    """Version of the converter in the tools image; part of the content key (a new converter redoes the work)."""
    hf_token: pulumi.Input[str] | None = None
    """Hugging Face token (a Pulumi secret) for gated repos; stored in a Secret created here."""
    hf_token_secret: str | None = None
    """Name of an existing Secret with key ``token``, instead of ``hf_token``."""
    download_bandwidth: int = DOWNLOAD_BANDWIDTH
    """Bytes/s assumed for the download; scales the Job deadline and Pulumi's wait."""
    verify_generation: bool = True
    """Run ``tritonft verify --generate`` in the Job when the model fits its memory (see ``job_sizing``)."""
    bleu_threshold: float = 15.0
    """BLEU the generation check requires of a T5 model."""
    ttl_seconds_after_finished: int | None = None
    """None (the default): the finished Job stays, so ``pulumi refresh`` finds it and the next ``up`` neither
    re-creates nor waits for it (a Job deleted by its TTL is a diff on every refresh). The Job is content-keyed,
    so a new model revision replaces it and Pulumi deletes the old one. A number deletes it after that long."""


class ModelConversion(pulumi.ComponentResource):
    """Download, convert and render one model into the store with a Kubernetes Job."""

    job_name: pulumi.Output[str]
    """Name of the conversion Job (content-keyed)."""
    conversion_key: pulumi.Output[str]
    """Content key of the FT checkpoint."""
    repository_dir: pulumi.Output[str]
    """Absolute path (inside pods mounting the store) of this model's Triton repository."""

    model: ModelSpec
    """The model this conversion puts into the store."""
    paths: ModelPaths
    """Its checkpoint and repository directories in the store."""
    job: k8s.batch.v1.Job
    """The conversion Job (TritonService depends on it)."""
    reference_job: k8s.batch.v1.Job | None
    """A FasterTransformer generator's reference Job (download -> ``tritonft reference``), beside the conversion."""
    jobs: tuple[k8s.batch.v1.Job, ...]
    """Every Job the model's repository needs: what the servers wait for."""

    def __init__(self, name: str, args: ModelConversionArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        if args.hf_token is not None and args.hf_token_secret:
            raise UserError(f"ModelConversion {name!r}: give hf_token or hf_token_secret, not both")
        if args.ttl_seconds_after_finished is not None and args.ttl_seconds_after_finished < 0:
            raise UserError(f"ModelConversion {name!r}: ttl_seconds_after_finished must be >= 0 seconds")
        if not args.converter_version:
            raise UserError(f"ModelConversion {name!r}: converter_version is empty (it is part of the content key)")
        super().__init__("triton-ft:conversion:ModelConversion", name, {}, opts)
        model = args.model
        target = args.target
        self.model = model
        self.paths = model_paths(model, args.converter_version)
        sizing = job_sizing(model, download_bw=args.download_bandwidth, verify_generation=args.verify_generation)
        job = conversion_job_name(model, args.converter_version)
        meta_labels = labels("conversion", name, model.name)
        child = pulumi.ResourceOptions(parent=self, provider=target.provider)

        spec_map = k8s.core.v1.ConfigMap(
            f"{name}-spec",
            metadata=object_meta(f"{job}-spec", target.namespace, meta_labels),
            data=as_input({SPEC_FILE: model.to_json()}),
            immutable=True,
            opts=child,
        )

        token_secret = args.hf_token_secret
        if args.hf_token is not None:
            token_secret = dns_label(f"{name}-hf-token")
            k8s.core.v1.Secret(
                f"{name}-hf-token",
                metadata=object_meta(token_secret, target.namespace, meta_labels),
                type="Opaque",
                string_data=as_input({HF_TOKEN_KEY: pulumi.Output.secret(args.hf_token)}),
                opts=child,
            )

        pod = ConversionPod(
            image=args.tools_image,
            claim_name=args.store.k8s_name,
            spec_config_map=f"{job}-spec",
            cpu_node_selector=target.cpu_node_selector,
            gpu_node_selector=target.gpu.node_selector,
            hf_token_secret=token_secret,
            bleu_threshold=args.bleu_threshold,
            priority_class=target.priority.batch if target.priority else None,
            reference_job=reference_job_name(model, args.converter_version)
            if model.family.is_fastertransformer
            else "",
            conversion_job=job,
            writable=writable_dirs(self.paths) if args.store.owned_subpaths else (),
        )
        pod_selector = selector("conversion", name)
        k8s.networking.v1.NetworkPolicy(
            f"{name}-job-netpol",
            metadata=object_meta(dns_label(f"{name}-conversion"), target.namespace, meta_labels),
            spec=as_input(conversion_network_policy_spec(pod_selector)),
            opts=child,
        )
        self.reference_job: k8s.batch.v1.Job | None = None
        if model.family.is_fastertransformer:
            # Beside the conversion, from its own download; whichever of the two finishes second renders the
            # repository, and the TritonService waits for both.
            reference_sizing = judge_reference_job_sizing(model, download_bw=args.download_bandwidth)
            self.reference_job = self._job(
                f"{name}-reference-job",
                reference_job_name(model, args.converter_version),
                model=model,
                target=target,
                meta_labels=meta_labels,
                pod_selector=pod_selector,
                pod_spec=conversion_pod_spec(model, self.paths, pod, reference_sizing, reference=True),
                sizing=reference_sizing,
                ttl_seconds_after_finished=args.ttl_seconds_after_finished,
                depends_on=[args.store.claim, spec_map],
                annotations={"triton-ft/judge-reference": self.paths.judge_reference},
            )
        self.job = self._job(
            f"{name}-job",
            job,
            model=model,
            target=target,
            meta_labels=meta_labels,
            pod_selector=pod_selector,
            pod_spec=conversion_pod_spec(model, self.paths, pod, sizing),
            sizing=sizing,
            ttl_seconds_after_finished=args.ttl_seconds_after_finished,
            depends_on=[args.store.claim, spec_map],
            annotations={"triton-ft/repository-dir": self.paths.repository_dir},
        )
        self.jobs: tuple[k8s.batch.v1.Job, ...] = (self.job, *([self.reference_job] if self.reference_job else []))
        self.job_name = pulumi.Output.from_input(job)
        self.conversion_key = pulumi.Output.from_input(model.conversion_key(args.converter_version))
        self.repository_dir = pulumi.Output.from_input(self.paths.repository_dir)
        self.register_outputs(
            {"job_name": self.job_name, "conversion_key": self.conversion_key, "repository_dir": self.repository_dir}
        )

    def _job(
        self,
        resource_name: str,
        job: str,
        *,
        model: ModelSpec,
        target: ClusterTarget,
        meta_labels: dict[str, str],
        pod_selector: dict[str, str],
        pod_spec: dict[str, Any],
        sizing: JobSizing,
        ttl_seconds_after_finished: int | None,
        depends_on: list[pulumi.Resource],
        annotations: dict[str, str],
    ) -> k8s.batch.v1.Job:
        """One content-keyed Job of this model (its conversion, or its reference), waited for by ``pulumi up``."""
        timeout = f"{sizing.pulumi_timeout_minutes}m"
        return k8s.batch.v1.Job(
            resource_name,
            metadata=object_meta(
                job,
                target.namespace,
                meta_labels,
                {"triton-ft/hf-repo": model.hf_repo, "triton-ft/revision": model.revision, **annotations},
            ),
            spec=as_input(
                {
                    "backoffLimit": sizing.backoff_limit,
                    # Kubernetes counts the Job's deadline over every try: each try gets its own (the pod's
                    # activeDeadlineSeconds below), and the Job all of them.
                    "activeDeadlineSeconds": (sizing.backoff_limit + 1) * sizing.active_deadline_seconds,
                    **(
                        {"ttlSecondsAfterFinished": ttl_seconds_after_finished}
                        if ttl_seconds_after_finished is not None
                        else {}
                    ),
                    "template": {
                        "metadata": {
                            "labels": {**meta_labels, **pod_selector},
                            # cluster-autoscaler must not drain a CPU node under a running conversion.
                            "annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
                        },
                        "spec": {**pod_spec, "activeDeadlineSeconds": sizing.active_deadline_seconds},
                    },
                }
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=target.provider,
                depends_on=depends_on,
                # Same content key, different pod details (image digest, resources): the fixed name must be freed
                # before the replacement is created.
                delete_before_replace=True,
                custom_timeouts=pulumi.CustomTimeouts(create=timeout, update=timeout),
            ),
        )
