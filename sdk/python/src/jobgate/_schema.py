"""Params models: the JSON Schema of a dataclass or pydantic model, and params decoded into one.

jobgate refuses a schema that leaves a string or an array unbounded or an object open, so a generated
schema closes every object, and a string or list field needs a bound: ``param(max_length=...)``
(``max_items`` for lists) on a dataclass, ``Field(max_length=...)`` on a pydantic model.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from enum import Enum
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

__all__ = ["param", "params_of", "schema_of"]

_META = "jobgate_schema"


def param(
    default: Any = dataclasses.MISSING,
    *,
    description: str | None = None,
    max_length: int | None = None,
    min_length: int | None = None,
    pattern: str | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
    max_items: int | None = None,
    min_items: int | None = None,
) -> Any:
    """A dataclass field with JSON Schema bounds for the generated schema."""
    extra: dict[str, Any] = {}
    for k, v in (
        ("description", description),
        ("maxLength", max_length),
        ("minLength", min_length),
        ("pattern", pattern),
        ("minimum", minimum),
        ("maximum", maximum),
        ("maxItems", max_items),
        ("minItems", min_items),
    ):
        if v is not None:
            extra[k] = v
    return dataclasses.field(default=default, metadata={_META: extra})


def _is_pydantic(model: Any) -> bool:
    return isinstance(model, type) and hasattr(model, "model_json_schema") and hasattr(model, "model_validate")


class SchemaError(ValueError):
    """A params model jobgate would refuse, or one this package cannot describe."""


def _json_default(v: Any) -> Any:
    if isinstance(v, Enum):
        return v.value
    if isinstance(v, tuple):
        return list(v)
    return v


def _type_schema(tp: Any, where: str, extra: dict[str, Any]) -> dict[str, Any]:
    origin = get_origin(tp)
    if origin is typing.Annotated:
        return _type_schema(get_args(tp)[0], where, extra)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1:
            inner = _type_schema(args[0], where, extra)
            t = inner.get("type")
            if isinstance(t, str):
                inner["type"] = [t, "null"]
            return inner
        return {"anyOf": [_type_schema(a, where, dict(extra)) for a in args]}
    s: dict[str, Any] = {}
    if origin is Literal:
        s["enum"] = [_json_default(a) for a in get_args(tp)]
    elif origin in (list, tuple, set, frozenset) or tp in (list, tuple):
        item_types = get_args(tp)
        s["type"] = "array"
        if item_types:
            s["items"] = _type_schema(item_types[0], where + "[]", {})
        if "maxItems" not in extra:
            raise SchemaError(f"{where}: a list needs a bound: param(max_items=...)")
    elif tp is bool:
        s["type"] = "boolean"
    elif tp is int:
        s["type"] = "integer"
    elif tp is float:
        s["type"] = "number"
    elif tp is str:
        s["type"] = "string"
        if "maxLength" not in extra and "enum" not in extra:
            raise SchemaError(f"{where}: a string needs a bound: param(max_length=...)")
    elif isinstance(tp, type) and issubclass(tp, Enum):
        s["enum"] = [m.value for m in tp]
    elif dataclasses.is_dataclass(tp) and isinstance(tp, type):
        s.update(_dataclass_schema(tp, where))
    else:
        raise SchemaError(f"{where}: {tp!r} has no JSON Schema here; pass schema= by hand")
    s.update(extra)
    return s


def _dataclass_schema(cls: type, where: str = "") -> dict[str, Any]:
    hints = get_type_hints(cls, include_extras=True)
    props: dict[str, Any] = {}
    required: list[str] = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        extra = dict(f.metadata.get(_META, {}))
        ps = _type_schema(hints[f.name], f"{where}/{f.name}", extra)
        if f.default is not dataclasses.MISSING:
            if f.default is not None:
                ps["default"] = _json_default(f.default)
        elif f.default_factory is dataclasses.MISSING:
            required.append(f.name)
        props[f.name] = ps
    s: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": props}
    if required:
        s["required"] = required
    if cls.__doc__ and not where and not cls.__doc__.startswith(cls.__name__ + "("):
        s["description"] = cls.__doc__.strip()[:1000]
    return s


def _close_objects(s: Any) -> Any:
    # pydantic leaves objects open unless extra="forbid": jobgate needs them closed.
    if isinstance(s, dict):
        out = {k: _close_objects(v) for k, v in s.items() if k != "title"}
        if out.get("type") == "object" and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(s, list):
        return [_close_objects(v) for v in s]
    return s


def schema_of(model: Any) -> dict[str, Any]:
    """The JSON Schema (2020-12) of a dataclass or a pydantic (v2) model."""
    if _is_pydantic(model):
        return typing.cast(dict[str, Any], _close_objects(model.model_json_schema()))
    if dataclasses.is_dataclass(model) and isinstance(model, type):
        return _dataclass_schema(model)
    raise SchemaError(f"{model!r} is neither a dataclass nor a pydantic model")


def _build(tp: Any, v: Any) -> Any:
    origin = get_origin(tp)
    if origin is typing.Annotated:
        return _build(get_args(tp)[0], v)
    if v is None:
        return None
    if origin in (Union, types.UnionType):
        for a in get_args(tp):
            if a is type(None):
                continue
            try:
                return _build(a, v)
            except (TypeError, ValueError):
                continue
        return v
    if origin in (list, tuple, set, frozenset) and isinstance(v, list):
        args = get_args(tp)
        items = [_build(args[0], x) for x in v] if args else list(v)
        return origin(items) if origin is not list else items
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if not isinstance(v, dict):
            raise TypeError(f"{tp.__name__} needs an object")
        hints = get_type_hints(tp, include_extras=True)
        names = {f.name for f in dataclasses.fields(tp) if f.init}
        return tp(**{k: _build(hints[k], x) for k, x in v.items() if k in names})
    if isinstance(tp, type) and issubclass(tp, Enum):
        return tp(v)
    if tp is float and isinstance(v, int):
        return float(v)
    return v


def params_of(model: Any, params: Any) -> Any:
    """params (validated by jobgate, defaults applied) as an instance of model."""
    if _is_pydantic(model):
        return model.model_validate(params)
    return _build(model, params)
