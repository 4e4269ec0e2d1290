"""Container images of the stack: the Triton + FasterTransformer server image (FT's models only), one more server
image per other serving engine in use, on a current Triton (ONNX Runtime: NGC's ``-py3`` release with only the ONNX
Runtime and Python backends; vLLM: NGC's ``-vllm-python-py3`` release), and the ``tritonft`` tools image.

Each is either built from this repository's Dockerfile and pushed to its own ECR repository (immutable,
content-derived tags, registry build cache outside prod) or a prebuilt reference the user pins by digest. Workloads
always get ``repository@sha256:...``: a rebuild rolls pods, an unchanged build does not, and nobody runs ``latest``.

Each build's context is the folder that holds exactly what its Dockerfile copies (the server image:
``images/triton-ft/``; the tools image: the repository root through ``images/tools/Dockerfile.dockerignore``; an
engine's own server image: its Dockerfile's folder), and its tag is derived from what the docker-build provider's own
change detection reads (:mod:`components.platform.build_context`), so the tag is new exactly when the provider
rebuilds.

The build cache is a mutable repository (every build overwrites it), so anyone who can push there could slip layers
into the next build that pulls it: prod builds use no cache (neither pull nor push; its build-cache repository is
not created), the other environments keep it for speed. The registry password a build logs in with is a secret.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pulumi
import pulumi_aws as aws
import pulumi_docker_build as docker_build

from components.platform.aws.decisions import is_prod
from components.platform.base_images import base_build_args, dockerfile_bases, unpinned_bases, unpinned_message
from components.platform.build_context import build_view, context_tag
from tritonft.engines import ENGINES
from tritonft.engines.base import ServerImage
from tritonft.engines.fastertransformer import ENGINE as FASTERTRANSFORMER
from tritonft.engines.fastertransformer import server_build_args as ft_build_args
from tritonft.engines.fastertransformer.versions import DEFAULT_CUDA_ARCHS, FT_BACKEND_COMMIT, FT_COMMIT, TRITON_VERSION
from tritonft.errors import UserError

DIGEST_REF = re.compile(r"^(?P<repo>[a-z0-9][a-z0-9._/:-]*?)(?::[\w][\w.-]{0,127})?@sha256:[0-9a-f]{64}$")

TOOLS_DOCKERFILE = "images/tools/Dockerfile"
TOOLS_CONTEXT = "."
"""The tools image is built from the repository root; ``images/tools/Dockerfile.dockerignore`` sends only
``pyproject.toml``, ``uv.lock``, ``tritonft/`` and ``model_repo/`` (no README, no ``components/``)."""
SERVER_DOCKERFILE = FASTERTRANSFORMER.server_image.dockerfile
SERVER_CONTEXT = str(Path(SERVER_DOCKERFILE).parent)
"""A server image is built from its Dockerfile's own folder (``images/triton-ft/``), whose ``.dockerignore`` sends
only what the Dockerfile copies."""


LIFECYCLE_POLICY = json.dumps(
    {
        "rules": [
            {
                "rulePriority": 1,
                "description": "untagged images (overwritten caches, interrupted pushes) expire after 14 days",
                "selection": {
                    "tagStatus": "untagged",
                    "countType": "sinceImagePushed",
                    "countUnit": "days",
                    "countNumber": 14,
                },
                "action": {"type": "expire"},
            }
        ]
    }
)
"""Tagged images are what stacks deploy (by digest, under a content tag): they never expire."""


def validate_prebuilt(role: str, ref: str) -> str:
    """``ref`` if it is pinned by digest (``repo@sha256:<64 hex>``, an optional tag before ``@`` is allowed)."""
    if not DIGEST_REF.match(ref.strip()):
        raise UserError(
            f"images.{role}: '{ref}' is not pinned by digest; tags move, so deployments would not be reproducible. "
            f"Use '<repository>@sha256:<64 hex digits>' (find it with: docker buildx imagetools inspect {ref})"
        )
    return ref.strip()


def uses_build_cache(environment: str) -> bool:
    """Whether builds of ``environment`` pull and push the registry build cache (never prod's: see the module)."""
    return not is_prod(environment)


def repository_encryption(kms_key_arn: str | None) -> aws.ecr.RepositoryEncryptionConfigurationArgs:
    """KMS with the customer-managed key when there is one, else AES-256 (ECR's AWS-managed encryption)."""
    if kms_key_arn:
        return aws.ecr.RepositoryEncryptionConfigurationArgs(encryption_type="KMS", kms_key=kms_key_arn)
    return aws.ecr.RepositoryEncryptionConfigurationArgs(encryption_type="AES256")


def extra_server_images(engines: Sequence[str]) -> dict[str, ServerImage]:
    """The server images beyond FasterTransformer's that ``engines`` (names, the stack's engines in use) need, by
    engine: one per engine whose image differs from FT's (ONNX Runtime: NGC's current release with the ONNX Runtime and
    Python backends; vLLM: NGC's vLLM release). FT's Triton 23.04 serves FT's models only.
    An unknown name is a :class:`UserError`."""
    known = {engine.name: engine for engine in ENGINES}
    unknown = sorted(set(engines) - set(known))
    if unknown:
        raise UserError(f"images: no serving engine named {unknown}; the engines are {sorted(known)}")
    return {
        name: known[name].server_image
        for name in sorted(set(engines))
        if known[name].server_image != FASTERTRANSFORMER.server_image
    }


def server_build_args(build: ImageBuild) -> dict[str, str]:
    return ft_build_args(build.triton_version, build.ft_backend_commit, build.ft_commit, build.cuda_archs)


@dataclass(frozen=True)
class ImageBuild:
    """How images are built from this repository."""

    context_dir: str = "."
    """Repository root (holds ``images/`` and the ``tritonft`` package)."""
    triton_version: str = TRITON_VERSION
    """NGC ``tritonserver:<version>-py3`` base; FT backend builds are known to work up to 23.05."""
    ft_backend_commit: str = FT_BACKEND_COMMIT
    ft_commit: str = FT_COMMIT
    cuda_archs: tuple[str, ...] = DEFAULT_CUDA_ARCHS
    platform: str = "linux/amd64"
    build_on_preview: bool = False
    """Build during ``pulumi preview`` too (off: the FT compile takes ~1 h; previews stay fast)."""


@dataclass(frozen=True)
class TritonImageArgs:
    """Images for one stack: built and pushed to ECR, or prebuilt references pinned by digest."""

    environment: str
    """``prod`` keeps repositories (and their images) on ``destroy``; elsewhere they are force-deleted."""
    aws_provider: aws.Provider | None = None
    """The platform's AWS provider (region + default tags); required when anything is built."""
    repository_prefix: str = "triton-ft"
    """ECR repositories are ``<prefix>/server``, ``<prefix>/tools`` and ``<prefix>/build-cache``."""
    build: ImageBuild = field(default_factory=ImageBuild)
    registry: str | None = None
    """Push to this registry (``host[:port]/path``) instead of ECR; credentials come from the operator's docker
    login (used on ``platform: kubernetes``)."""
    server_prebuilt: str | None = None
    """Use this server image (``repo@sha256:...``) instead of building one."""
    tools_prebuilt: str | None = None
    """Use this tools image (``repo@sha256:...``) instead of building one."""
    kms_key_arn: str | None = None
    """Customer-managed KMS key the ECR repositories are encrypted with; None = AES-256 (AWS-managed)."""
    protect_repositories: bool | None = None
    """``protect`` the ECR repositories against ``pulumi destroy``; None = only in prod."""
    engines: tuple[str, ...] = ()
    """The serving engines the stack's models use (names); each engine whose server image is not FT's gets its own,
    built from its Dockerfile into ``<prefix>/server-<engine>`` (or given prebuilt in ``engine_prebuilt``)."""
    engine_prebuilt: Mapping[str, str] = field(default_factory=dict)
    """A prebuilt server image (``repo@sha256:...``) by engine name, instead of building that engine's."""
    base_digests: Mapping[str, str] = field(default_factory=dict)
    """The digest of each base image (``repository:tag``) a Dockerfile leaves unpinned (``baseImageDigests``):
    :mod:`components.platform.base_images`."""


class TritonImage(pulumi.ComponentResource):
    """The server and tools images, each deployed by digest."""

    server_image: pulumi.Output[str]
    """Triton + FasterTransformer server image, ``repository@sha256:...``."""
    tools_image: pulumi.Output[str]
    """``tritonft`` tools image (download, convert, probe Jobs), ``repository@sha256:...``."""
    engine_images: dict[str, pulumi.Output[str]]
    """The server image of every engine in use whose image is not FT's, by engine name."""

    def __init__(self, name: str, args: TritonImageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        server_ref = validate_prebuilt("serverImage", args.server_prebuilt) if args.server_prebuilt else None
        tools_ref = validate_prebuilt("toolsImage", args.tools_prebuilt) if args.tools_prebuilt else None
        extra = extra_server_images(args.engines)
        engine_refs = {
            engine: validate_prebuilt(f"engineImages.{engine}", args.engine_prebuilt[engine])
            for engine in extra
            if engine in args.engine_prebuilt
        }
        to_build = [engine for engine in extra if engine not in engine_refs]
        if (server_ref is None or tools_ref is None or to_build) and args.aws_provider is None and not args.registry:
            raise UserError(
                "images: building an image needs somewhere to push it: ECR (aws_provider) or a registry "
                "(imageRegistry); or give both images prebuilt and pinned by digest"
            )
        super().__init__("triton-ft:image:TritonImage", name, {}, opts)
        self._args = args
        root = Path(args.build.context_dir)
        cache: aws.ecr.Repository | None = None
        if server_ref is None or tools_ref is None or to_build:
            if args.aws_provider is not None and uses_build_cache(args.environment):
                cache = self._repository(f"{name}-build-cache", f"{args.repository_prefix}/build-cache", mutable=True)
            self._docker = docker_build.Provider(f"{name}-docker-build", opts=pulumi.ResourceOptions(parent=self))
        if server_ref is None:
            self.server_image = self._build(
                f"{name}-server",
                f"{args.repository_prefix}/server",
                context=root / SERVER_CONTEXT,
                dockerfile=root / SERVER_DOCKERFILE,
                tag_prefix=f"{args.build.triton_version}-ft",
                build_args=server_build_args(args.build),
                cache=cache,
            )
        else:
            self.server_image = pulumi.Output.from_input(server_ref)
        if tools_ref is None:
            self.tools_image = self._build(
                f"{name}-tools",
                f"{args.repository_prefix}/tools",
                context=root / TOOLS_CONTEXT,
                dockerfile=root / TOOLS_DOCKERFILE,
                tag_prefix="tools",
                build_args={},
                cache=cache,
            )
        else:
            self.tools_image = pulumi.Output.from_input(tools_ref)
        self.engine_images = {}
        for engine, image in extra.items():
            if engine in engine_refs:
                self.engine_images[engine] = pulumi.Output.from_input(engine_refs[engine])
                continue
            self.engine_images[engine] = self._build(
                f"{name}-server-{engine}",
                f"{args.repository_prefix}/server-{engine}",
                context=root / Path(image.dockerfile).parent,
                dockerfile=root / image.dockerfile,
                tag_prefix=f"{engine}-{image.build_args.get('TRITON_VERSION', 'c')}",
                build_args=dict(image.build_args),
                cache=cache,
            )
        outputs: dict[str, object] = {"server_image": self.server_image, "tools_image": self.tools_image}
        if self.engine_images:
            outputs["engine_images"] = self.engine_images
        self.register_outputs(outputs)

    def server_image_for(self, engine: str) -> pulumi.Output[str]:
        """The server image a model of ``engine`` runs in: its own when it has one, else FT's."""
        return self.engine_images.get(engine, self.server_image)

    def _repository(self, resource_name: str, repo_name: str, *, mutable: bool = False) -> aws.ecr.Repository:
        """An ECR repository; images scanned on push; force-deleted with its images only outside prod; untagged
        images expire (:data:`LIFECYCLE_POLICY`)."""
        repo = aws.ecr.Repository(
            resource_name,
            name=repo_name,
            # The build cache is overwritten on every build, so only its repository is mutable.
            image_tag_mutability="MUTABLE" if mutable else "IMMUTABLE",
            image_scanning_configuration=aws.ecr.RepositoryImageScanningConfigurationArgs(scan_on_push=True),
            encryption_configurations=[repository_encryption(self._args.kms_key_arn)],
            force_delete=not is_prod(self._args.environment),
            opts=pulumi.ResourceOptions(
                parent=self,
                provider=self._args.aws_provider,
                protect=is_prod(self._args.environment)
                if self._args.protect_repositories is None
                else self._args.protect_repositories,
            ),
        )
        aws.ecr.LifecyclePolicy(
            f"{resource_name}-lifecycle",
            repository=repo.name,
            policy=LIFECYCLE_POLICY,
            opts=pulumi.ResourceOptions(parent=repo, provider=self._args.aws_provider),
        )
        return repo

    def _build(
        self,
        resource_name: str,
        repo_name: str,
        *,
        context: Path,
        dockerfile: Path,
        tag_prefix: str,
        build_args: dict[str, str],
        cache: aws.ecr.Repository | None,
    ) -> pulumi.Output[str]:
        # The bases pinned by the stack's digests; in prod the Dockerfile refuses one still a tag alone.
        text = dockerfile.read_text()
        prod = is_prod(self._args.environment)
        pins = base_build_args(text, build_args, self._args.base_digests, prod=prod)
        unpinned = unpinned_bases(dockerfile_bases(text, build_args), pins)
        if prod and unpinned:
            pulumi.log.warn(unpinned_message(str(dockerfile), unpinned), resource=self)
        build_args = {**build_args, **pins}
        # Every input the provider diffs besides the context goes into the tag too, so no input change can make it
        # rebuild under a tag that already exists (an IMMUTABLE repository refuses that push).
        tag = context_tag(
            build_view(context, dockerfile),
            {**build_args, "platform": self._args.build.platform, "cache": resource_name},
            prefix=tag_prefix,
        )
        registries: list[docker_build.RegistryArgs] = []
        depends: list[pulumi.Resource] = []
        cache_ref: pulumi.Output[str] | None = None
        if self._args.aws_provider is None:
            registry = str(self._args.registry).rstrip("/")
            repo_url: pulumi.Output[str] = pulumi.Output.from_input(f"{registry}/{repo_name}")
            if uses_build_cache(self._args.environment):
                cache_ref = pulumi.Output.from_input(
                    f"{registry}/{self._args.repository_prefix}/build-cache:{resource_name}"
                )
        else:
            repo = self._repository(f"{resource_name}-repo", repo_name)
            auth = aws.ecr.get_authorization_token_output(
                registry_id=repo.registry_id,
                opts=pulumi.InvokeOutputOptions(provider=self._args.aws_provider, parent=self),
            )
            repo_url = repo.repository_url
            registries.append(
                docker_build.RegistryArgs(
                    address=repo.repository_url.apply(lambda url: url.split("/", 1)[0]),
                    username=auth.user_name,
                    # A short-lived ECR token, but a credential all the same: never in the plan or the state.
                    password=pulumi.Output.secret(auth.password),
                )
            )
            if cache is not None:
                cache_ref = cache.repository_url.apply(lambda url: f"{url}:{resource_name}")
                depends.append(cache)
        image = docker_build.Image(
            resource_name,
            context=docker_build.BuildContextArgs(location=str(context)),
            dockerfile=docker_build.DockerfileArgs(location=str(dockerfile)),
            platforms=[docker_build.Platform(self._args.build.platform)],
            build_args=build_args,
            push=True,
            build_on_preview=self._args.build.build_on_preview,
            tags=[repo_url.apply(lambda url: f"{url}:{tag}")],
            cache_from=cache_from(cache_ref),
            cache_to=cache_to(cache_ref),
            registries=registries,
            opts=pulumi.ResourceOptions(parent=self, provider=self._docker, depends_on=depends),
        )
        return pulumi.Output.concat(repo_url, "@", image.digest)


def cache_from(ref: pulumi.Output[str] | None) -> list[docker_build.CacheFromArgs]:
    """Pull layers from the registry cache ``ref`` (none without one)."""
    return [] if ref is None else [docker_build.CacheFromArgs(registry=docker_build.CacheFromRegistryArgs(ref=ref))]


def cache_to(ref: pulumi.Output[str] | None) -> list[docker_build.CacheToArgs]:
    """Push every layer to the registry cache ``ref`` (none without one). ECR only accepts registry caches as an
    image manifest with OCI media types."""
    if ref is None:
        return []
    registry = docker_build.CacheToRegistryArgs(
        ref=ref, image_manifest=True, oci_media_types=True, mode=docker_build.CacheMode.MAX
    )
    return [docker_build.CacheToArgs(registry=registry)]
