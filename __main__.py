"""Composition root of the triton-ft Pulumi program: load settings, build the components in order, export."""

from __future__ import annotations

import pulumi

from components import args
from components.cluster import ExistingCluster
from components.settings.pulumi_config import settings_from_pulumi
from tritonft.errors import UserError

try:
    settings = settings_from_pulumi()
except UserError as exc:
    # RunError ends `pulumi up`/`preview` with the message only: no traceback for a configuration mistake.
    raise pulumi.RunError(str(exc)) from None

name = settings.stack
cluster = ExistingCluster(name, args.existing_cluster_args(settings))
target = cluster.target

pulumi.export("environment", settings.environment)
pulumi.export("namespace", target.namespace)
pulumi.export("models", [m.name for m in settings.models])
