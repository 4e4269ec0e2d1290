"""The guardrails of ``checks.py`` as CrossGuard ``ResourceValidationPolicy`` objects.

Kept apart from ``__main__.py`` because constructing the ``PolicyPack`` starts a gRPC server and blocks forever:
tests import these policies and call ``policy.validate(args, report_violation)`` directly.

The environment-dependent rules (prod storage protection, TLS outside ``local``) read the environment from the
policy config (``{"<policy>": {"environment": "prod"}}`` via ``--policy-pack-config`` / the action's
``policyPackConfigs``) and otherwise derive it from the stack name in the resource URN (``prod``, ``pr-42``...).
"""

from __future__ import annotations

from collections.abc import Callable

from checks import ENVIRONMENTS, RULES, Resource, Rule, resolve_environment
from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)

ENVIRONMENT_SCHEMA = PolicyConfigSchema(
    properties={
        "environment": {
            "type": "string",
            "enum": list(ENVIRONMENTS),
            "description": "Environment tier of the stack; default: implied by the stack name.",
        }
    }
)


def resource_of(args: ResourceValidationArgs) -> Resource:
    """What a rule sees of the resource the engine is registering."""
    return Resource(
        type=args.resource_type,
        name=args.name,
        props=args.props,
        protect=bool(args.opts.protect),
        environment=resolve_environment(args.get_config().get("environment"), args.urn),
    )


def validator(rule: Rule) -> Callable[[ResourceValidationArgs, ReportViolation], None]:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        for message in rule.check(resource_of(args)):
            report_violation(message, None)

    validate.__name__ = f"validate_{rule.name.replace('-', '_')}"
    return validate


def policy_of(rule: Rule) -> ResourceValidationPolicy:
    return ResourceValidationPolicy(
        name=rule.name,
        description=rule.description,
        validate=validator(rule),
        enforcement_level=EnforcementLevel.MANDATORY,
        config_schema=ENVIRONMENT_SCHEMA if rule.uses_environment else None,
        remediation_steps=rule.remediation,
    )


POLICIES: list[ResourceValidationPolicy] = [policy_of(rule) for rule in RULES]
POLICY_BY_NAME: dict[str, ResourceValidationPolicy] = {p.name: p for p in POLICIES}
