"""A small evaluator of IAM trust-policy conditions, as IAM applies them to ``sts:AssumeRoleWithWebIdentity`` from
GitHub's OIDC provider: every operator block must hold, every key in a block must hold, a key holds when the
request's value matches **any** of the listed values; a key the request lacks fails (no ``...IfExists``).
``StringEquals`` compares exactly and case-sensitively; ``StringLike`` too, with ``*`` matching any run of characters
(``/`` and ``:`` included) and ``?`` one character. Condition keys are case-insensitive; values are not. Operators
not listed here are refused rather than guessed."""

from __future__ import annotations

import re
from typing import Any


def _like(pattern: str, value: str) -> bool:
    regex = "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)
    return re.fullmatch(regex, value, flags=re.DOTALL) is not None


OPERATORS = {
    "StringEquals": lambda pattern, value: pattern == value,
    "StringLike": _like,
}


def allows(policy: dict[str, Any], provider_arn: str, claims: dict[str, str]) -> bool:
    """Whether ``policy`` lets a web identity from ``provider_arn`` whose token carries ``claims`` (condition keys
    ``token.actions.githubusercontent.com:<claim>``) assume the role."""
    request = {f"token.actions.githubusercontent.com:{k}".lower(): v for k, v in claims.items()}
    for statement in policy["Statement"]:
        if statement["Effect"] != "Allow" or statement["Action"] != "sts:AssumeRoleWithWebIdentity":
            continue
        if statement["Principal"] != {"Federated": provider_arn}:
            continue
        if all(_holds(op, block, request) for op, block in statement.get("Condition", {}).items()):
            return True
    return False


def _holds(operator: str, block: dict[str, Any], request: dict[str, str]) -> bool:
    if operator not in OPERATORS:
        raise ValueError(f"operator {operator} is not evaluated here")
    test = OPERATORS[operator]
    for key, wanted in block.items():
        value = request.get(key.lower())
        values = wanted if isinstance(wanted, list) else [wanted]
        if value is None or not any(test(str(w), value) for w in values):
            return False
    return True
