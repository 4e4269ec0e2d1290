"""Run Pulumi programs under the mock engine, deterministically (pulumi-practice.md §1.3-1.4).

The SDK sends every monitor RPC through ``loop.run_in_executor``; with a thread pool, resource references are
rehydrated on a pool thread's private loop and the run flakes ("Task attached to a different loop",
pulumi/pulumi#6561). Running RPCs inline on the calling thread (as Pulumi's own tests do, PR #7666) makes the
mock engine deterministic.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pulumi
from pulumi.runtime.mocks import MockMonitor


class InlineExecutor(ThreadPoolExecutor):
    """Runs each submitted call immediately on the calling thread."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        try:
            fut.set_result(fn(*args, **kwargs))
        except BaseException as exc:
            fut.set_exception(exc)
        return fut


@contextmanager
def mock_engine(
    mocks: RecordingMocks,
    project: str,
    stack: str,
    config: dict[str, str] | None = None,
    secret_keys: list[str] | None = None,
) -> Iterator[None]:
    """A fresh event loop + recording mock monitor for one program run; everything is torn down afterwards."""
    loop = asyncio.new_event_loop()
    loop.set_default_executor(InlineExecutor(max_workers=1))
    asyncio.set_event_loop(loop)
    try:
        pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=False, monitor=RecordingMonitor(mocks))
        pulumi.runtime.set_all_config(dict(config or {}), secret_keys or [])
        yield
    finally:
        pulumi.runtime.set_all_config({}, [])
        pulumi.runtime.settings.reset_options()
        loop.close()
        asyncio.set_event_loop(None)


def run_program(build: Callable[[], Any]) -> None:
    """Run ``build`` under the active mock engine until every registration, RPC and apply has finished."""
    pulumi.runtime.test(build)()  # type: ignore[no-untyped-call]


def _fake_digest(*parts: str) -> str:
    import hashlib

    return "sha256:" + hashlib.sha256("\x00".join(parts).encode()).hexdigest()


def _ecr_repository(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    account, region = "123456789012", "us-east-1"
    name = str(args.inputs.get("name") or args.name)
    return {
        "repositoryUrl": f"{account}.dkr.ecr.{region}.amazonaws.com/{name}",
        "registryId": account,
        "arn": f"arn:aws:ecr:{region}:{account}:repository/{name}",
    }


def _docker_build_image(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    import json

    digest = _fake_digest(args.name, json.dumps(args.inputs, sort_keys=True, default=str))
    tags = list(args.inputs.get("tags") or [])
    repo = str(tags[0]).rsplit(":", 1)[0] if tags else f"registry.invalid/{args.name}"
    return {"digest": digest, "ref": f"{repo}@{digest}"}


def _eks_cluster(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": args.name, "cluster": {"server": f"https://{args.name}.eks.invalid"}}],
        "contexts": [{"name": args.name, "context": {"cluster": args.name, "user": args.name}}],
        "current-context": args.name,
        "users": [{"name": args.name, "user": {}}],
    }
    import json

    issuer = f"oidc.eks.us-east-1.amazonaws.com/id/{args.name.upper()}"
    return {
        "kubeconfig": kubeconfig,
        "kubeconfigJson": json.dumps(kubeconfig, sort_keys=True),
        "oidcProviderArn": f"arn:aws:iam::123456789012:oidc-provider/{issuer}",
        "oidcProviderUrl": issuer,
        "clusterSecurityGroupId": f"sg-{args.name}-cluster",
    }


def _iam_role(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    name = str(args.inputs.get("name") or args.name)
    return {"arn": f"arn:aws:iam::123456789012:role/{name}", "name": name}


def _random_password(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    """A stand-in for the generated value: derived from the name and keepers (so a rotation changes it), never a
    real key; the synth checks look for it to prove no generated credential reaches a file or a plain output."""
    seed = json.dumps([args.name, args.inputs.get("keepers")], sort_keys=True, default=str)
    length = int(args.inputs.get("length") or 32)
    return {"result": ("mockkey" + hashlib.sha256(seed.encode()).hexdigest())[:length]}


OUTPUT_TEMPLATES: dict[str, Callable[[pulumi.runtime.MockResourceArgs], dict[str, Any]]] = {
    "random:index/randomPassword:RandomPassword": _random_password,
    "aws:ecr/repository:Repository": _ecr_repository,
    "docker-build:index:Image": _docker_build_image,
    "eks:index:Cluster": _eks_cluster,
    "aws:iam/role:Role": _iam_role,
    "aws:ec2/launchTemplate:LaunchTemplate": lambda args: {"latestVersion": 1},
    # The provider drops the API's `:*` suffix from a log group's ARN.
    "aws:cloudwatch/logGroup:LogGroup": lambda args: {
        "arn": f"arn:aws:logs:us-east-1:123456789012:log-group:{args.inputs.get('name') or args.name}"
    },
}
"""Fake provider outputs per type token (wire names), for outputs the program reads back."""

ADDON_VERSION_CALL = "aws:eks/getAddonVersion:getAddonVersion"


SSM_PARAMETER_CALL = "aws:ssm/getParameter:getParameter"


def ssm_parameter_result(call_args: dict[str, Any]) -> dict[str, Any]:
    """An SSM public parameter as the plan shows it: its value names the parameter read (``ssm:/aws/service/...``),
    so a plan shows where each value (a node group's AMI release) comes from."""
    name = str(call_args.get("name"))
    return {"name": name, "value": f"ssm:{name}", "insecureValue": f"ssm:{name}", "type": "String", "id": name}


def addon_version_result(call_args: dict[str, Any]) -> dict[str, Any]:
    """EKS's answer to ``describe-addon-versions`` as the plan shows it: a version naming the add-on and the
    Kubernetes minor it was asked for (``coredns@1.35``), so a plan shows which version each add-on follows."""
    addon, minor = call_args.get("addonName"), call_args.get("kubernetesVersion")
    return {"addonName": addon, "kubernetesVersion": minor, "version": f"{addon}@{minor}", "id": f"{addon}@{minor}"}


CALL_RESULTS: dict[str, dict[str, Any]] = {
    "aws:ecr/getAuthorizationToken:getAuthorizationToken": {
        "userName": "AWS",
        "password": "mock-ecr-password",
        "proxyEndpoint": "https://123456789012.dkr.ecr.us-east-1.amazonaws.com",
        "authorizationToken": "bW9jaw==",
        "expiresAt": "2099-01-01T00:00:00Z",
        "id": "123456789012",
    },
    "aws:index/getCallerIdentity:getCallerIdentity": {
        "accountId": "123456789012",
        "arn": "arn:aws:iam::123456789012:user/mock",
        "userId": "mock",
        "id": "123456789012",
    },
    "aws:route53/getZone:getZone": {
        "zoneId": "Z0123456789MOCKZONE",
        "arn": "arn:aws:route53:::hostedzone/Z0123456789MOCKZONE",
        "name": "example.com",
        "id": "Z0123456789MOCKZONE",
    },
    "aws:index/getRegion:getRegion": {"name": "us-east-1", "region": "us-east-1", "id": "us-east-1"},
    "aws:ec2/getVpc:getVpc": {"id": "vpc-0123456789abcdef0", "cidrBlock": "10.20.0.0/16", "default": False},
    # An account whose "Running On-Demand G and VT instances" quota was raised to hold prod's day-two peak: 10 x
    # g5.12xlarge at gpuNodesMax + 4 more while a node group update surges (twice its 2 zones) = 14 x 48 = 672
    # vCPUs; tests of the quota check answer with their own values.
    "aws:servicequotas/getServiceQuota:getServiceQuota": {
        "value": 672.0,
        "quotaCode": "L-DB2E81BA",
        "serviceCode": "ec2",
        "quotaName": "Running On-Demand G and VT instances",
        "adjustable": True,
        "defaultValue": 0.0,
        "globalQuota": False,
        "id": "ec2/L-DB2E81BA",
    },
    "aws:index/getAvailabilityZones:getAvailabilityZones": {
        "names": ["us-east-1a", "us-east-1b", "us-east-1c"],
        "zoneIds": ["use1-az1", "use1-az2", "use1-az3"],
        "id": "us-east-1",
    },
}
"""Fake invoke results per function token."""


@dataclass(frozen=True)
class Registered:
    """One registered resource: what the program asked the engine for (inputs *and* resource options)."""

    typ: str
    name: str
    urn: str
    parent: str
    custom: bool
    provider: str
    inputs: dict[str, Any]
    protect: bool = False
    retain_on_delete: bool = False
    delete_before_replace: bool = False
    depends_on: tuple[str, ...] = ()
    custom_timeouts: dict[str, str] = field(default_factory=dict)
    ignore_changes: tuple[str, ...] = ()
    replace_on_changes: tuple[str, ...] = ()
    additional_secret_outputs: tuple[str, ...] = ()


class RecordingMocks(pulumi.runtime.Mocks):
    """Echoes inputs as state (keeps resource references resolvable), adds fake outputs, records every call."""

    def __init__(self) -> None:
        self.resources: list[Registered] = []
        self.calls: list[pulumi.runtime.MockCallArgs] = []
        self._request: Any = None

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str | None, dict[Any, Any]]:
        self.resources.append(_registered(args, self._request))
        state = dict(args.inputs)
        template = OUTPUT_TEMPLATES.get(args.typ)
        if template is not None:
            state |= template(args)
        return f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
        self.calls.append(args)
        # An empty failure list, not None: the SDK's MockMonitor iterates the second element of a tuple.
        if args.token == ADDON_VERSION_CALL:
            return addon_version_result(args.args), []
        if args.token == SSM_PARAMETER_CALL:
            return ssm_parameter_result(args.args), []
        return dict(CALL_RESULTS.get(args.token, {})), []

    def of_type(self, typ: str) -> list[Registered]:
        """Every registered resource of one type token, in registration order."""
        return [r for r in self.resources if r.typ == typ]

    def named(self, name: str) -> Registered:
        """The one registered resource with this logical name."""
        (match,) = [r for r in self.resources if r.name == name]
        return match

    def by_urn(self, urn: str) -> Registered:
        (match,) = [r for r in self.resources if r.urn == urn]
        return match


class RecordingMonitor(MockMonitor):
    """The SDK's mock monitor, plus the resource options (parent, protect, dependsOn, ...) of each registration."""

    def __init__(self, mocks: RecordingMocks) -> None:
        super().__init__(mocks)
        self.recorder = mocks

    def RegisterResource(self, request: Any) -> Any:  # noqa: N802 (gRPC method name)
        self.recorder._request = (request, self.make_urn(request.parent, request.type, request.name))
        try:
            return super().RegisterResource(request)  # type: ignore[no-untyped-call]
        finally:
            self.recorder._request = None


def _registered(args: pulumi.runtime.MockResourceArgs, pending: Any) -> Registered:
    if pending is None:
        return Registered(args.typ, args.name, "", "", bool(args.custom), args.provider or "", dict(args.inputs))
    request, urn = pending
    timeouts = request.customTimeouts
    return Registered(
        typ=args.typ,
        name=args.name,
        urn=urn,
        parent=request.parent,
        custom=bool(args.custom),
        provider=args.provider or "",
        inputs=dict(args.inputs),
        protect=bool(request.protect),
        retain_on_delete=bool(request.retainOnDelete),
        delete_before_replace=bool(request.deleteBeforeReplace),
        depends_on=tuple(request.dependencies),
        custom_timeouts={
            k: v
            for k, v in (("create", timeouts.create), ("update", timeouts.update), ("delete", timeouts.delete))
            if v
        },
        ignore_changes=tuple(request.ignoreChanges),
        replace_on_changes=tuple(request.replaceOnChanges),
        additional_secret_outputs=tuple(request.additionalSecretOutputs),
    )
