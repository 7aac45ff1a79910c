"""Build policies by name from plain mappings (YAML, JSON, REST bodies, `--set k=v`).

`build_policy({"name": "static-k", "k": 70, "ranker": "highest-power"})` checks the name, every
setting's name and type, then the policy's own range checks; each failure is a
`PolicyConfigError` that names the policy and the setting and lists what is valid.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from enum import Enum
from typing import Any

from powertrip.errors import PolicyConfigError
from powertrip.selection.base import Policy
from powertrip.selection.dynamic import PowerTripPolicy
from powertrip.selection.policies import AllSites, Centralized, FixedRadius, RandomK, StaticK

POLICY_TYPES: dict[str, type[Any]] = {
    cls.name: cls for cls in (PowerTripPolicy, AllSites, StaticK, RandomK, FixedRadius, Centralized)
}
POLICY_NAMES: tuple[str, ...] = tuple(POLICY_TYPES)

_NOT_A_POLICY = {
    "static-optimal": "static-optimal is the best k of a sweep over static-k; "
    "the simulator runs that sweep (policy 'static-k' gives one point of it)",
}


def policy_settings(name: str) -> dict[str, dataclasses.Field[Any]]:
    """The settings a policy accepts, by name."""
    return {f.name: f for f in dataclasses.fields(_policy_type(name))}


def build_policy(config: Mapping[str, Any]) -> Policy:
    """A policy from a mapping with a `name` key and the policy's settings."""
    if not isinstance(config, Mapping):
        raise PolicyConfigError(f"a policy is a mapping with a 'name', got {config!r}")
    if "name" not in config:
        raise PolicyConfigError(f"a policy needs a 'name', one of: {', '.join(POLICY_NAMES)}")
    name = str(config["name"])
    cls = _policy_type(name)
    fields = policy_settings(name)
    hints = typing.get_type_hints(cls)
    settings: dict[str, Any] = {}
    for key, value in config.items():
        if key == "name":
            continue
        if key not in fields:
            valid = ", ".join(fields) or "(none)"
            raise PolicyConfigError(f"policy {name!r} has no setting {key!r}; valid: {valid}")
        settings[key] = _coerce(name, key, hints[key], value)
    missing = [
        f.name
        for f in fields.values()
        if f.default is dataclasses.MISSING and f.name not in settings
    ]
    if missing:
        raise PolicyConfigError(f"policy {name!r} needs setting(s): {', '.join(missing)}")
    policy: Policy = cls(**settings)
    return policy


def _policy_type(name: str) -> type[Any]:
    if name in POLICY_TYPES:
        return POLICY_TYPES[name]
    hint = f" ({_NOT_A_POLICY[name]})" if name in _NOT_A_POLICY else ""
    raise PolicyConfigError(
        f"unknown policy {name!r}{hint}; valid policies: {', '.join(POLICY_NAMES)}"
    )


def _coerce(policy: str, setting: str, hint: Any, value: Any) -> Any:
    """Convert a setting to its declared type; strings are accepted (command-line `--set`)."""
    options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    if type(None) in options and (value is None or str(value).lower() in ("none", "null")):
        return None
    target = next(t for t in options if t is not type(None))
    try:
        if isinstance(target, type) and issubclass(target, Enum):
            return target(str(value))
        if isinstance(value, bool):
            raise TypeError("a boolean is not a number")
        if target is int:
            number = float(value)
            if number != int(number):
                raise ValueError("not a whole number")
            return int(number)
        if target is float:
            return float(value)
    except (TypeError, ValueError) as error:
        expected = (
            "one of " + ", ".join(str(m.value) for m in target)
            if isinstance(target, type) and issubclass(target, Enum)
            else f"a{'n' if target is int else ''} {target.__name__}"
        )
        raise PolicyConfigError(
            f"policy {policy!r}: setting {setting!r} must be {expected}, got {value!r} ({error})"
        ) from None
    raise PolicyConfigError(f"policy {policy!r}: setting {setting!r} has unsupported type {hint}")


def policy_json_schema() -> dict[str, Any]:
    """JSON Schema of a policy mapping: one alternative per policy with its settings' types
    (range checks stay with the policies, which explain what is out of range)."""
    alternatives = []
    for name in POLICY_NAMES:
        fields = policy_settings(name)
        hints = typing.get_type_hints(_policy_type(name))
        properties: dict[str, Any] = {"name": {"const": name}}
        for setting in fields:
            properties[setting] = _setting_schema(hints[setting])
        required = [f.name for f in fields.values() if f.default is dataclasses.MISSING]
        alternatives.append(
            {
                "type": "object",
                "title": name,
                "properties": properties,
                "required": ["name", *required],
                "additionalProperties": False,
            }
        )
    return {"oneOf": alternatives}


def _setting_schema(hint: Any) -> dict[str, Any]:
    options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    schemas: list[dict[str, Any]] = []
    for option in options:
        if option is type(None):
            schemas.append({"type": "null"})
        elif isinstance(option, type) and issubclass(option, Enum):
            schemas.append({"type": "string", "enum": [str(m.value) for m in option]})
        elif option is int:
            schemas.append({"type": "integer"})
        else:
            schemas.append({"type": "number"})
    return schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
