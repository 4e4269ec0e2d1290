"""Names AWS has: its regions and its EC2 instance types, as the AWS provider package this project pins ships them.

The truth is not a list kept here: ``pulumi_aws`` (the provider that creates the VPC, the EKS cluster and the node
groups) is generated from the AWS API and ships every region (``pulumi_aws.Region``, ``pulumi_aws/_enums.py``) and
every EC2 instance type (``pulumi_aws.ec2.InstanceType``, ``pulumi_aws/ec2/_enums.py``). A name outside them would
pass ``tritonft synth`` and fail only when the provider calls AWS; with them it is refused before any resource, with
the nearest real names. A new region or instance family arrives with a ``pulumi_aws`` upgrade (``uv lock``).

The enums are imported on first use only (a ``kubernetes`` stack never pays for them).
"""

from __future__ import annotations

import difflib
from functools import cache
from importlib.metadata import PackageNotFoundError, version


@cache
def provider_version() -> str:
    """The installed ``pulumi_aws`` version (named in messages, so a refused new name points at the upgrade)."""
    try:
        return version("pulumi_aws")
    except PackageNotFoundError:  # pragma: no cover - pulumi_aws is a locked dependency
        return "unknown"


@cache
def aws_regions() -> frozenset[str]:
    """Every region ``pulumi_aws.Region`` lists (commercial, China, GovCloud and isolated partitions)."""
    from pulumi_aws._enums import Region

    return frozenset(str(r.value) for r in Region)


@cache
def ec2_instance_types() -> frozenset[str]:
    """Every EC2 instance type ``pulumi_aws.ec2.InstanceType`` lists."""
    from pulumi_aws.ec2._enums import InstanceType

    return frozenset(str(t.value) for t in InstanceType)


def _nearest(value: str, names: frozenset[str]) -> str:
    close = difflib.get_close_matches(value, sorted(names), n=3, cutoff=0.6)
    return f"; did you mean {' or '.join(f'`{c}`' for c in close)}?" if close else ""


_SIZES = ("nano", "micro", "small", "medium", "large", "xlarge")


def _size_order(instance_type: str) -> tuple[int, str]:
    """``m6i.large`` < ``m6i.xlarge`` < ``m6i.2xlarge`` < ... < ``m6i.metal``: smallest first."""
    size = instance_type.split(".", maxsplit=1)[1] if "." in instance_type else instance_type
    if size in _SIZES:
        return _SIZES.index(size), size
    count = size.removesuffix("xlarge")
    if count != size and count.isdigit():
        return len(_SIZES) + int(count), size
    return 10_000, size


def region_problems(value: str) -> list[str]:
    """``[]`` for a region AWS has, else why not and the nearest regions."""
    if value in aws_regions():
        return []
    return [
        f"is not an AWS region (the regions pulumi_aws {provider_version()} knows, e.g. `us-west-2`)"
        + _nearest(value, aws_regions())
    ]


def instance_type_problems(value: str) -> list[str]:
    """``[]`` for an EC2 instance type AWS has, else why not and the nearest types."""
    if value in ec2_instance_types():
        return []
    family = value.split(".", maxsplit=1)[0]
    sizes = sorted((t for t in ec2_instance_types() if t.split(".", maxsplit=1)[0] == family), key=_size_order)
    hint = f"; {family} comes in {', '.join(sizes)}" if sizes else _nearest(value, ec2_instance_types())
    return [f"is not an EC2 instance type (the types pulumi_aws {provider_version()} knows, e.g. `m6i.2xlarge`){hint}"]
