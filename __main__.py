"""Composition root of the triton-ft Pulumi program: load settings, build the components in order, export."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from components import args
from components.cluster import ClusterTarget, ExistingCluster
from components.image import TritonImage
from components.platform_aws import AwsPlatform
from components.settings.pulumi_config import settings_from_pulumi
from tritonft.errors import UserError

try:
    settings = settings_from_pulumi()
except UserError as exc:
    # RunError ends `pulumi up`/`preview` with the message only: no traceback for a configuration mistake.
    raise pulumi.RunError(str(exc)) from None

name = settings.stack
target: ClusterTarget
aws_provider: aws.Provider | None
if settings.cluster.platform == "aws":
    platform = AwsPlatform(name, args.aws_platform_args(settings))
    target, aws_provider = platform.target, platform.aws_provider
    pulumi.export("clusterName", platform.cluster_name)
    pulumi.export("kubeconfig", platform.kubeconfig)
else:
    target, aws_provider = ExistingCluster(name, args.existing_cluster_args(settings)).target, None

images = TritonImage(f"{name}-images", args.triton_image_args(settings, aws_provider))

pulumi.export("environment", settings.environment)
pulumi.export("namespace", target.namespace)
pulumi.export("serverImage", images.server_image)
pulumi.export("toolsImage", images.tools_image)
pulumi.export("models", [m.name for m in settings.models])
