"""The evaluator's IAM semantics on their own: StringLike's wildcards span `/` and `:`, values are case-sensitive,
any listed value suffices, a missing claim fails, every block must hold."""

from __future__ import annotations

from tests.components.delivery.iam import allows

ARN = "arn:aws:iam::123456789012:oidc-provider/token.actions.githubusercontent.com"


def policy(condition: dict[str, dict[str, object]]) -> dict[str, object]:
    return {
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Federated": ARN},
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": condition,
            }
        ]
    }


def test_string_like_star_spans_slashes_and_colons() -> None:
    p = policy({"StringLike": {"token.actions.githubusercontent.com:sub": "repo:o/r:*"}})
    assert allows(p, ARN, {"sub": "repo:o/r:environment:x:job_workflow_ref:o/r/a.yml@refs/pull/1/merge"})
    assert not allows(p, ARN, {"sub": "repo:o/r2:pull_request"})


def test_string_equals_is_exact_and_case_sensitive() -> None:
    p = policy({"StringEquals": {"token.actions.githubusercontent.com:sub": "repo:o/r:environment:production"}})
    assert allows(p, ARN, {"sub": "repo:o/r:environment:production"})
    assert not allows(p, ARN, {"sub": "repo:o/r:environment:Production"})


def test_any_listed_value_suffices_and_every_block_must_hold() -> None:
    p = policy(
        {
            "StringEquals": {"token.actions.githubusercontent.com:aud": "sts.amazonaws.com"},
            "StringLike": {"token.actions.githubusercontent.com:sub": ["repo:o/r:a", "repo:o/r:b"]},
        }
    )
    assert allows(p, ARN, {"aud": "sts.amazonaws.com", "sub": "repo:o/r:b"})
    assert not allows(p, ARN, {"aud": "other", "sub": "repo:o/r:b"})
    assert not allows(p, ARN, {"sub": "repo:o/r:b"})  # a missing claim fails


def test_another_identity_provider_is_not_trusted() -> None:
    p = policy({"StringEquals": {"token.actions.githubusercontent.com:aud": "sts.amazonaws.com"}})
    assert not allows(p, "arn:aws:iam::123456789012:oidc-provider/other", {"aud": "sts.amazonaws.com"})
