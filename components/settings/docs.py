"""The configuration reference's tables and Pulumi.yaml's typed ``config:`` block, generated from the schema (pure).

``python -m stackcli.docs`` writes them (``docs/reference/configuration.md``, ``Pulumi.yaml``) with the other
generated references.
"""

from __future__ import annotations

from typing import Any

from components.settings.rules import MODEL_RULES, PLAN_RULES, STACK_RULES
from components.settings.schema import FORMATS, MODEL_KNOBS, STACK_KNOBS, Knob

PROJECT = "triton-ft"


def _type_label(knob: Knob) -> str:
    if knob.type == "array":
        return {"object": "list of mappings", "integer": "list of integers"}.get(knob.items, "list of strings")
    label = {"object": "mapping", "quantity": "quantity"}.get(knob.type, knob.type)
    return f"{label} ({knob.unit})" if knob.unit else label


def _row(knob: Knob) -> str:
    meaning = knob.doc
    if knob.choices_doc:
        meaning += f" One of: {knob.choices_doc}."
    elif knob.choices and knob.type != "array":
        meaning += " One of: " + ", ".join(f"`{c}`" for c in knob.choices) + "."
    elif knob.choices:
        meaning += " Entries from: " + ", ".join(f"`{c}`" for c in knob.choices) + "."
    if knob.secret:
        meaning += " **Secret.**"
    default = knob.shown_default()
    default = default if default.startswith(("`", "required", "unset")) else f"`{default}`"
    return f"| `{knob.key}` | {knob.scope} | {_type_label(knob)} | {default} | {meaning} |"


def reference_tables() -> str:
    """Markdown tables of every stack key and every model-entry key, and of the cross-field rules."""
    lines = [
        "Stack keys (`triton-ft:<key>` in `stacks/Pulumi.<stack>.yaml`; *platform* = where the key applies):",
        "",
        "| key | platform | type | default | meaning |",
        "|---|---|---|---|---|",
        *(_with_rules(_row(k), k, model=False) for k in STACK_KNOBS),
        "",
        "Model entries (each item of `models`):",
        "",
        "| key | platform | type | default | meaning |",
        "|---|---|---|---|---|",
        *(_with_rules(_row(k), k, model=True) for k in MODEL_KNOBS),
        "",
        *rules_reference(),
    ]
    return "\n".join(lines)


def _rule_ids(key: str, *, model: bool) -> list[str]:
    """Ids of the cross-field rules that bind ``key`` (a model-entry key when ``model``)."""
    if model:
        return [r.id for r in MODEL_RULES if key in r.keys]
    ids = [r.id for r in STACK_RULES if key in r.keys]
    ids += [r.id for r in MODEL_RULES if key in r.stack_keys]
    return ids + [r.id for r in PLAN_RULES if key in r.keys]


def _with_rules(row: str, knob: Knob, *, model: bool) -> str:
    """A reference row with the key's grammar and the cross-field rules that bind it, next to the key."""
    extra = ""
    if knob.format:
        extra += f" Must be: {FORMATS[knob.format].doc}."
    ids = _rule_ids(knob.key, model=model)
    if ids:
        extra += " Rules: " + ", ".join(f"[`{i}`](#rule-{i})" for i in ids) + "."
    head, _, last = row.rpartition(" |")
    return f"{head}{extra} |{last}"


def rules_reference() -> list[str]:
    """The cross-field rules table: id, the keys it binds (as written in the stack file), the rule."""
    lines = [
        "Cross-field rules (checked before anything is created; each message names the key as written):",
        "",
        "| rule | keys | rule |",
        "|---|---|---|",
    ]
    for rule in STACK_RULES:
        keys = ", ".join(f"`{k}`" for k in rule.keys)
        lines.append(f'| <a id="rule-{rule.id}"></a>`{rule.id}` | {keys} | {rule.doc} |')
    for model_rule in MODEL_RULES:
        keys = ", ".join([f"`models[].{k}`" for k in model_rule.keys] + [f"`{k}`" for k in model_rule.stack_keys])
        lines.append(f'| <a id="rule-{model_rule.id}"></a>`{model_rule.id}` | {keys} | {model_rule.doc} |')
    for plan_rule in PLAN_RULES:
        keys = ", ".join(f"`{k}`" for k in plan_rule.keys)
        lines.append(f'| <a id="rule-{plan_rule.id}"></a>`{plan_rule.id}` | {keys} | {plan_rule.doc} |')
    return lines


def declared_in_project(knob: Knob) -> bool:
    """Whether ``Pulumi.yaml`` declares the knob.

    The CLI treats a declared key of the project's namespace with no ``default`` as required of *every* stack
    (``pkg/workspace/config.go``, ``mergeConfig``), and a declared default reaches every stack. So only two kinds
    are declared: keys that apply to every platform and have a static default, and keys every stack must set.
    Platform-specific keys, keys whose default depends on other keys, secrets without a default and
    object-valued keys (which Pulumi's project schema cannot type) are validated and documented by the program.
    """
    if knob.pulumi_type is None or knob.scope != "any":
        return False
    return knob.default is not None or knob.required


def pulumi_config_block() -> dict[str, Any]:
    """Typed project config for ``Pulumi.yaml``: exactly the keys :func:`declared_in_project` allows."""
    block: dict[str, Any] = {}
    for knob in filter(declared_in_project, STACK_KNOBS):
        entry: dict[str, Any] = {"type": knob.pulumi_type, "description": knob.doc}
        if knob.pulumi_type == "array":
            entry["items"] = {"type": "string"}
        if knob.default is not None:
            entry["default"] = knob.default
        if knob.secret:
            entry["secret"] = True
        block[f"{PROJECT}:{knob.key}"] = entry
    return block
