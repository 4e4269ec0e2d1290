"""What one stage hands another, as protocols: the stages never import each other, only these shapes.

``ModelConversion`` (models) is a :class:`ConvertedModel`, ``ModelStore`` (models) a :class:`ModelVolume` and
``TritonService`` (serving) a :class:`ServedModel`; ``__main__`` passes the objects across.
"""

from __future__ import annotations

from typing import Protocol

import pulumi

from components.common.layout import ModelPaths
from tritonft.spec import ModelSpec


class ModelVolume(Protocol):
    """The model store as the Triton service mounts it."""

    @property
    def k8s_name(self) -> str:
        """The PersistentVolumeClaim's name."""
        ...

    @property
    def claim(self) -> pulumi.Resource:
        """The claim itself, for ``depends_on``."""
        ...


class ConvertedModel(Protocol):
    """One model's conversion as the Triton service serves it."""

    @property
    def model(self) -> ModelSpec:
        """The model spec the conversion Job converted."""
        ...

    @property
    def paths(self) -> ModelPaths:
        """Where the conversion wrote the weights and the rendered repository on the store."""
        ...

    @property
    def job(self) -> pulumi.Resource:
        """The conversion Job, which the Triton Deployment waits for."""
        ...

    @property
    def jobs(self) -> tuple[pulumi.Resource, ...]:
        """Every Job the model's repository needs (the conversion Job, and a T5/GPT-2/GPT-J model's reference Job):
        the Triton Deployment waits for all of them."""
        ...


class ServedModel(Protocol):
    """One model's Triton service as the gateway reaches it."""

    @property
    def grpc_address(self) -> pulumi.Output[str]:
        """``host:port`` of Triton's gRPC endpoint inside the cluster."""
        ...

    @property
    def pod_selector(self) -> dict[str, str]:
        """Labels that select the Triton pods (the gateway's NetworkPolicy peers)."""
        ...

    @property
    def scales_to_zero(self) -> bool:
        """Whether the model's replicas may be 0 (the gateway then wakes it)."""
        ...

    @property
    def rollout_watch(self) -> pulumi.Resource:
        """The rollout watch the gateway's Deployment waits for."""
        ...

    @property
    def switched(self) -> tuple[pulumi.Resource, ...]:
        """The user-facing Services, whose selector names the version the program declares: done once that version
        serves (after its judge and promotion gate passed, for a judged promotion); for a version that rolled in place,
        also its judge. The gateway's specs, chat templates and mounted checkpoints wait for them, so they describe the
        version users are sent to once it is judged right (a failed in-place version: the previous one's, until a
        revert or a fix passes)."""
        ...
