"""The rules the real Pulumi CLI applies to ``Pulumi.yaml`` and a stack file before the program runs.

The mock engine only runs the program, so every rule below is reproduced here, from Pulumi v3's sources:

- ``sdk/go/common/workspace/project.json`` (the project schema): a typed config declaration has a ``type`` from
  ``string|integer|boolean|array``, arrays need ``items``, and only ``type/items/description/secret/default`` are
  allowed.
- ``sdk/go/common/workspace/project.go`` (``Project.Validate``, ``ValidateConfigValue``): a default must be of its
  declared type; integers accept whole numbers and strings that parse as integers, booleans accept ``true``/``false``
  and the strings ``"true"``/``"false"``, arrays check every item.
- ``sdk/go/common/resource/config/value.go`` (``Value.UnmarshalYAML``): a scalar in the stack file is kept as its
  literal text (``1``, ``True``, ``"1"`` -> ``1``, ``True``, ``1``); mappings and lists become JSON objects.
- ``pkg/workspace/config.go`` (``mergeConfig``): for each declared key of the project's namespace, in key order,
  a stack that does not set it takes its ``default``; with no default the key is *missing*, and all missing keys
  stop the command at once (``Stack 'S' is missing configuration values 'a' and 'b'``). A value that is set is
  checked against the declared type, and the first mismatch stops the command.

The functions are pure; ``tritonft synth`` applies them so that what it synthesises is what the CLI would run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from tritonft.synth import go_yaml

SIMPLE_TYPES = ("string", "integer", "boolean", "array")
DECLARATION_ATTRIBUTES = ("type", "items", "description", "secret", "default")
_GO_ATOI = re.compile(r"^[+-]?[0-9]+$")


@dataclass(frozen=True)
class CliValue:
    """One stack config value as the CLI holds it: literal text, or JSON text for an object/list."""

    text: str
    is_object: bool = False
    secure: bool = False

    def content(self) -> Any:
        """What the CLI type-checks: the string itself, or the decoded JSON for an object."""
        return json.loads(self.text) if self.is_object else self.text


class CliRuleError(ValueError):
    """The real CLI would stop before the program runs; the message is the CLI's own."""


def qualified(project: str, key: str) -> str:
    return key if ":" in key else f"{project}:{key}"


def in_project_namespace(project: str, key: str) -> bool:
    return ":" not in key or key.startswith(f"{project}:")


def validate_config_value(type_name: str, items: Mapping[str, Any] | None, value: Any) -> bool:
    """``ValidateConfigValue``: is ``value`` (a string, or decoded JSON) of the declared type?"""
    if type_name == "string":
        return isinstance(value, str)
    if type_name == "integer":
        if isinstance(value, bool):
            return False
        if isinstance(value, int):
            return True
        if isinstance(value, float):
            return value == int(value)
        return isinstance(value, str) and _GO_ATOI.match(value) is not None
    if type_name == "boolean":
        return isinstance(value, bool) or value in ("true", "false")
    if not isinstance(value, list) or items is None:
        return False
    return all(validate_config_value(str(items.get("type")), items.get("items"), item) for item in value)


def full_type_name(type_name: str, items: Mapping[str, Any] | None) -> str:
    """``InferFullTypeName``: ``array<string>`` for an array of strings."""
    if items is not None:
        return f"array<{full_type_name(str(items.get('type')), items.get('items'))}>"
    return type_name


def _items_problems(key: str, items: Any) -> list[str]:
    if not isinstance(items, Mapping) or "type" not in items:
        return [f"config '{key}': `items` must be a mapping with a `type`"]
    if items["type"] not in SIMPLE_TYPES:
        return [f"config '{key}': items type {items['type']!r} is not one of {', '.join(SIMPLE_TYPES)}"]
    if items["type"] == "array":
        return _items_problems(key, items.get("items"))
    return []


def project_config_problems(project: Mapping[str, Any]) -> list[str]:
    """Everything in ``Pulumi.yaml``'s ``config:`` block the CLI refuses to load (schema + ``Project.Validate``)."""
    name = str(project.get("name", ""))
    problems: list[str] = []
    for key, decl in (project.get("config") or {}).items():
        if not isinstance(decl, Mapping):
            continue  # shorthand `key: value` is a default (or a value outside the namespace); always allowed
        extra = sorted(set(decl) - set(DECLARATION_ATTRIBUTES))
        if extra:
            problems.append(f"config '{key}': attributes {extra} are not allowed; allowed: {DECLARATION_ATTRIBUTES}")
        if not in_project_namespace(name, key):
            problems.append(f"Configuration key '{key}' is not namespaced by the project and should not define a type")
            continue
        type_name = decl.get("type")
        if type_name not in SIMPLE_TYPES:
            problems.append(f"config '{key}': type {type_name!r} is not one of {', '.join(SIMPLE_TYPES)}")
            continue
        if type_name == "array":
            if "items" not in decl:
                problems.append(
                    f"The configuration key '{key}' declares an array but does not specify the underlying type "
                    "via the 'items' attribute"
                )
                continue
            problems += _items_problems(key, decl["items"])
        if decl.get("default") is not None and not validate_config_value(type_name, decl.get("items"), decl["default"]):
            problems.append(
                f"The default value specified for configuration key '{key}' is not of the expected type "
                f"'{full_type_name(type_name, decl.get('items'))}'"
            )
    return problems


class DuplicateKeysError(CliRuleError):
    """Keys written twice in one mapping: the CLI's YAML reader (yaml.v3) refuses the file."""

    def __init__(self, duplicates: list[go_yaml.DuplicateKey]) -> None:
        self.duplicates = duplicates
        super().__init__("yaml: unmarshal errors:\n" + "\n".join(f"  {d.go_message}" for d in duplicates))


def stack_values(stack_yaml: str) -> dict[str, CliValue]:
    """The ``config:`` of a stack file as the CLI reads it: scalars by their literal text, objects as JSON, every
    value as Go's yaml.v3 resolves it (:mod:`tritonft.synth.go_yaml`); a key written twice is refused."""
    root = yaml.compose(stack_yaml)
    if root is None:
        return {}
    if not isinstance(root, yaml.MappingNode):
        raise CliRuleError("the stack file must be a YAML mapping")
    duplicates = go_yaml.duplicate_keys(root)
    if duplicates:
        raise DuplicateKeysError(duplicates)
    loaded = go_yaml.load(stack_yaml) or {}
    config_node = next((v for k, v in root.value if k.value == "config"), None)
    if config_node is None or (isinstance(config_node, yaml.ScalarNode) and config_node.tag.endswith(":null")):
        return {}
    if not isinstance(config_node, yaml.MappingNode):
        raise CliRuleError("`config` must be a mapping of keys to values")
    values: dict[str, CliValue] = {}
    for key_node, value_node in config_node.value:
        key = str(key_node.value)
        if isinstance(value_node, yaml.ScalarNode):
            values[key] = CliValue("" if value_node.tag.endswith(":null") else str(value_node.value))
            continue
        obj = loaded["config"][key]
        if isinstance(obj, Mapping) and set(obj) == {"secure"} and isinstance(obj["secure"], str):
            values[key] = CliValue(obj["secure"], secure=True)
        else:
            values[key] = CliValue(json.dumps(obj, sort_keys=False), is_object=True)
    return values


def _default_value(default: Any) -> CliValue:
    """``createConfigValue``: strings, integers and booleans as Go's ``%v`` prints them, the rest as JSON."""
    if isinstance(default, bool):
        return CliValue("true" if default else "false")
    if isinstance(default, (str, int)):
        return CliValue(str(default))
    return CliValue(json.dumps(default), is_object=True)


def merge_project_config(project: Mapping[str, Any], stack: str, values: Mapping[str, CliValue]) -> dict[str, CliValue]:
    """``mergeConfig``: apply the project's declarations to one stack's values (keys fully qualified)."""
    name = str(project["name"])
    merged = {qualified(name, k): v for k, v in values.items()}
    declared = project.get("config") or {}
    missing: list[str] = []
    for key in sorted(declared):
        decl = declared[key]
        if not isinstance(decl, Mapping):
            decl = {"default": decl} if in_project_namespace(name, key) else {"value": decl}
        full = qualified(name, key)
        found = full in merged
        default = decl.get("value", decl.get("default"))
        if not found and default is None and in_project_namespace(name, key):
            missing.append(key)
            continue
        if not found and default is not None:
            merged[full] = _default_value(default)
            continue
        type_name = decl.get("type")
        if found and type_name is not None:
            value = merged[full]
            if decl.get("secret") and not value.secure:
                raise CliRuleError(f"Stack '{stack}' with configuration key '{key}' must be encrypted as it's secret")
            if not value.secure and not validate_config_value(type_name, decl.get("items"), value.content()):
                raise CliRuleError(
                    f"Stack '{stack}' with configuration key '{key}' must be of type "
                    f"'{full_type_name(type_name, decl.get('items'))}'"
                )
    if missing:
        raise CliRuleError(missing_keys_message(stack, missing))
    return merged


def missing_keys_message(stack: str, keys: list[str]) -> str:
    """``missingStackConfigurationKeysError``, word for word."""
    if len(keys) == 1:
        return f"Stack '{stack}' is missing configuration value '{keys[0]}'"
    quoted = [f"'{k}'" for k in sorted(keys)]
    return f"Stack '{stack}' is missing configuration values {', '.join(quoted[:-1])} and {quoted[-1]}"


def stringified_stack(stack_yaml: str) -> str:
    """The stack file as ``pulumi config set`` rewrites it: every top-level scalar quoted as a string.

    Objects and lists stay as they are; ``secure:`` values too. The CLI also adds an ``encryptionsalt`` line.
    """
    data = yaml.safe_load(stack_yaml) or {}
    values = stack_values(stack_yaml)
    config: dict[str, Any] = {}
    for key, value in values.items():
        original = data["config"][key]
        config[key] = value.text if not value.is_object and not value.secure else original
    out = {"encryptionsalt": "v1:c2FsdA==:v1:AAAAAAAAAAAAAAAA:AAAAAAAAAAAAAAAAAAAAAAAAAAAA", "config": config}
    return yaml.dump(out, sort_keys=False, default_style=None, width=120, Dumper=_QuotingDumper)


class _QuotingDumper(yaml.SafeDumper):
    """Quotes every string scalar, as the Go YAML encoder does for config values that look like numbers."""


def _quoted_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')


_QuotingDumper.add_representer(str, _quoted_str)
