"""Container images of the stack: the Triton + FasterTransformer server image and the ``tritonft`` tools image.

Each is either built from this repository's Dockerfile and pushed to its own ECR repository (immutable,
content-derived tags, registry build cache) or a prebuilt reference the user pins by digest. Workloads always get
``repository@sha256:...``: a rebuild rolls pods, an unchanged build does not, and nobody runs ``latest``.

Each build's context is the folder that holds exactly what its Dockerfile copies (the server image:
``images/triton-ft/``; the tools image: the repository root through ``images/tools/Dockerfile.dockerignore``), and
its tag is derived from what the docker-build provider's own change detection reads
(:mod:`components.platform.build_context`), so the tag is new exactly when the provider rebuilds.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pulumi
import pulumi_aws as aws
import pulumi_docker_build as docker_build

from components.platform.aws.decisions import is_prod
from components.platform.build_context import build_view, context_tag
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


class TritonImage(pulumi.ComponentResource):
    """The server and tools images, each deployed by digest."""

    server_image: pulumi.Output[str]
    """Triton + FasterTransformer server image, ``repository@sha256:...``."""
    tools_image: pulumi.Output[str]
    """``tritonft`` tools image (download, convert, probe Jobs), ``repository@sha256:...``."""

    def __init__(self, name: str, args: TritonImageArgs, opts: pulumi.ResourceOptions | None = None) -> None:
        server_ref = validate_prebuilt("serverImage", args.server_prebuilt) if args.server_prebuilt else None
        tools_ref = validate_prebuilt("toolsImage", args.tools_prebuilt) if args.tools_prebuilt else None
        if (server_ref is None or tools_ref is None) and args.aws_provider is None and not args.registry:
            raise UserError(
                "images: building an image needs somewhere to push it: ECR (aws_provider) or a registry "
                "(imageRegistry); or give both images prebuilt and pinned by digest"
            )
        super().__init__("triton-ft:image:TritonImage", name, {}, opts)
        self._args = args
        root = Path(args.build.context_dir)
        cache: aws.ecr.Repository | None = None
        if server_ref is None or tools_ref is None:
            if args.aws_provider is not None:
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
        self.register_outputs({"server_image": self.server_image, "tools_image": self.tools_image})

    def _repository(self, resource_name: str, repo_name: str, *, mutable: bool = False) -> aws.ecr.Repository:
        """An ECR repository; images scanned on push; force-deleted with its images only outside prod; untagged
        images expire (:data:`LIFECYCLE_POLICY`)."""
        repo = aws.ecr.Repository(
            resource_name,
            name=repo_name,
            # The build cache is overwritten on every build, so only its repository is mutable.
            image_tag_mutability="MUTABLE" if mutable else "IMMUTABLE",
            image_scanning_configuration=aws.ecr.RepositoryImageScanningConfigurationArgs(scan_on_push=not mutable),
            encryption_configurations=[aws.ecr.RepositoryEncryptionConfigurationArgs(encryption_type="AES256")],
            force_delete=not is_prod(self._args.environment),
            opts=pulumi.ResourceOptions(parent=self, provider=self._args.aws_provider),
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
        # Every input the provider diffs besides the context goes into the tag too, so no input change can make it
        # rebuild under a tag that already exists (an IMMUTABLE repository refuses that push).
        tag = context_tag(
            build_view(context, dockerfile),
            {**build_args, "platform": self._args.build.platform, "cache": resource_name},
            prefix=tag_prefix,
        )
        registries: list[docker_build.RegistryArgs] = []
        depends: list[pulumi.Resource] = []
        if cache is None:
            registry = str(self._args.registry).rstrip("/")
            repo_url: pulumi.Output[str] = pulumi.Output.from_input(f"{registry}/{repo_name}")
            cache_ref: pulumi.Output[str] = pulumi.Output.from_input(
                f"{registry}/{self._args.repository_prefix}/build-cache:{resource_name}"
            )
        else:
            repo = self._repository(f"{resource_name}-repo", repo_name)
            auth = aws.ecr.get_authorization_token_output(
                registry_id=repo.registry_id,
                opts=pulumi.InvokeOutputOptions(provider=self._args.aws_provider, parent=self),
            )
            repo_url = repo.repository_url
            cache_ref = cache.repository_url.apply(lambda url: f"{url}:{resource_name}")
            registries.append(
                docker_build.RegistryArgs(
                    address=repo.repository_url.apply(lambda url: url.split("/", 1)[0]),
                    username=auth.user_name,
                    password=auth.password,
                )
            )
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
            cache_from=[docker_build.CacheFromArgs(registry=docker_build.CacheFromRegistryArgs(ref=cache_ref))],
            # ECR only accepts registry caches as an image manifest with OCI media types.
            cache_to=[
                docker_build.CacheToArgs(
                    registry=docker_build.CacheToRegistryArgs(
                        ref=cache_ref, image_manifest=True, oci_media_types=True, mode=docker_build.CacheMode.MAX
                    )
                )
            ],
            registries=registries,
            opts=pulumi.ResourceOptions(parent=self, provider=self._docker, depends_on=depends),
        )
        return pulumi.Output.concat(repo_url, "@", image.digest)
