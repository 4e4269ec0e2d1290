"""``kmsKeyArn``: an optional customer-managed KMS key for Kubernetes Secrets and ECR (issue 42, item 6), validated
up front; where it goes is asserted in ``tests/components/platform`` (the EKS cluster, the ECR repositories)."""

from __future__ import annotations

import pytest

from components.args import aws_platform_args, triton_image_args
from components.settings.load import load_settings
from tests.components.settings.test_validation import as_cli, aws_stack, problems_of

KEY = "arn:aws:kms:us-west-2:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def test_a_key_arn_reaches_the_platform_and_the_images() -> None:
    settings = load_settings(as_cli(aws_stack(kmsKeyArn=KEY)), project="triton-ft", stack="dev")
    assert settings.cluster.aws is not None and settings.cluster.aws.kms_key_arn == KEY
    assert aws_platform_args(settings).kms_key_arn == KEY
    assert triton_image_args(settings, None).kms_key_arn == KEY


def test_without_a_key_aws_managed_keys_are_used() -> None:
    settings = load_settings(as_cli(aws_stack()), project="triton-ft", stack="dev")
    assert aws_platform_args(settings).kms_key_arn is None
    assert triton_image_args(settings, None).kms_key_arn is None


@pytest.mark.parametrize("value", ["alias/triton", "arn:aws:kms:us-west-2:123456789012:alias/triton", "1234abcd"])
def test_an_alias_or_a_bare_id_is_refused_naming_the_key_and_the_form(value: str) -> None:
    (problem,) = problems_of(aws_stack(kmsKeyArn=value))
    assert problem.startswith("kmsKeyArn:")
    assert "arn:aws:kms:<region>:<account>:key/<key id>" in problem
