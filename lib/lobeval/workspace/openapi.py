"""A bot's functions from a document the team already has (docs/cli.md#a-new-suite-init): an OpenAI-style tools list, or
an OpenAPI 3 document (JSON or YAML), one function per operation.

An operation's function takes its path, query and header parameters and its JSON request body as one JSON
Schema object; every `#/...` reference is replaced by what it points at. GET and HEAD read, the other methods
write. A problem is a RecordError naming the document, the operation (or tool) and the field.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import yaml

from lobeval.core.errors import RecordError
from lobeval.core.records import read_json, read_text

METHODS = ("get", "put", "post", "delete", "patch", "head")
"""OPTIONS and TRACE are left out: the protocol's own requests (CORS, diagnostics), not a bot's functions."""
READ_METHODS = ("get", "head")
IGNORED_HEADERS = ("accept", "content-type", "authorization")
"""OpenAPI 3 says header parameters of these names are ignored (the media types and security say them)."""
MAX_NAME = 64
"""The longest function name OpenAI's API takes."""


def read_document(path: Path) -> Any:
    """A JSON or YAML file (by its suffix .yaml / .yml), parsed."""
    if path.suffix.lower() not in (".yaml", ".yml"):
        return read_json(path)
    try:
        return yaml.safe_load(read_text(path))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        raise RecordError(path, f"line {mark.line + 1}" if mark else "file", None,
                          f"invalid YAML: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise RecordError(path, "file", None, f"invalid YAML: {exc}") from None


def functions_from_document(path: Path, document: Any) -> list[tuple[dict[str, Any], str | None]]:
    """(function definition, effect or None when the document does not say) for each function of a tools
    list or an OpenAPI 3 document."""
    if isinstance(document, list):
        return [_listed_function(path, index, entry) for index, entry in enumerate(document)]
    if isinstance(document, dict) and "swagger" in document:
        raise RecordError(path, "document", "swagger", f"Swagger {document['swagger']} is not read: convert the "
                                                       f"document to OpenAPI 3")
    if isinstance(document, dict) and "openapi" in document:
        if not str(document["openapi"]).startswith("3."):
            raise RecordError(path, "document", "openapi", f"version {document['openapi']!r}: only OpenAPI 3 is read")
        return operations(path, document)
    raise RecordError(path, "document", None, "is neither a list of tool definitions nor an OpenAPI 3 document "
                                              "(an object with an 'openapi' field)")


def _listed_function(path: Path, index: int, entry: Any) -> tuple[dict[str, Any], str | None]:
    """One entry of a tools list: `{"type": "function", "function": {...}}` (lobeval's `effect` beside it or
    not), or the flat form `{"type": "function", "name": ..., "parameters": ...}`."""
    if not isinstance(entry, dict):
        raise RecordError(path, f"tool {index}", None, "must be a JSON object")
    function = entry.get("function", {key: entry[key] for key in ("name", "description", "parameters") if key in entry})
    if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not function["name"]:
        raise RecordError(path, f"tool {index}", "function.name", "is required (a string)")
    where = f"tool '{function['name']}'"
    if not isinstance(function.get("description", ""), str):
        raise RecordError(path, where, "function.description", "must be text")
    effect = entry.get("effect")
    if effect not in (None, "read", "write"):
        raise RecordError(path, where, "effect", "must be read or write")
    return {"name": function["name"], "description": function.get("description") or "",
            "parameters": function.get("parameters", {"type": "object", "properties": {}})}, effect


def operations(path: Path, document: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """One function per operation of an OpenAPI 3 document, in the document's order."""
    paths = document.get("paths")
    if not isinstance(paths, dict) or not paths:
        raise RecordError(path, "document", "paths", "holds no operations")
    found: dict[str, str] = {}   # function name -> the operation that gave it
    functions = []
    for route, item in paths.items():
        if isinstance(item, dict) and "$ref" in item:
            item = _Resolver(path, document, f"path '{route}'").resolve(item)
        if not isinstance(item, dict):
            raise RecordError(path, f"path '{route}'", None, "must be an object")
        for method in (m for m in METHODS if m in item):
            where = f"operation '{method.upper()} {route}'"
            function = _operation(_Resolver(path, document, where), route, method, item)
            if function["name"] in found:
                raise RecordError(path, where, "operationId", f"gives the name {function['name']!r}, as "
                                                              f"{found[function['name']]} does")
            found[function["name"]] = where
            functions.append((function, "read" if method in READ_METHODS else "write"))
    if not functions:
        raise RecordError(path, "document", "paths", f"holds no operations ({', '.join(METHODS)})")
    return functions


def _operation(resolver: _Resolver, route: str, method: str, item: dict[str, Any]) -> dict[str, Any]:
    operation = resolver.resolve(item[method])
    if not isinstance(operation, dict):
        raise RecordError(resolver.path, resolver.where, None, "must be an object")
    properties: dict[str, Any] = {}
    required: list[str] = []
    listed = [*_listed(resolver, resolver.resolve(item.get("parameters")), "parameters (of the path)"),
              *_listed(resolver, operation.get("parameters"), "parameters")]
    # an operation's parameter replaces the path's of the same name and place
    by_key = {_parameter_key(resolver, parameter): parameter for parameter in listed}
    for (name, place), parameter in by_key.items():
        _add_parameter(resolver, name, place, parameter, properties, required)
    body = operation.get("requestBody")
    if body is not None:
        _add_body(resolver, body, properties, required)
    parameters = {"type": "object", "properties": properties, **({"required": required} if required else {})}
    described = list(dict.fromkeys(text.strip() for text in (operation.get("summary"), operation.get("description"))
                                   if isinstance(text, str) and text.strip()))
    return {"name": function_name(operation.get("operationId"), method, route),
            "description": " ".join([*map(_sentence, described[:-1]), *described[-1:]]), "parameters": parameters}


def _sentence(text: str) -> str:
    """A summary followed by the description: a sentence of its own (a summary has no full stop, and would run
    on into the description)."""
    return text if text.endswith((".", "!", "?", ":")) else f"{text}."


def function_name(operation_id: Any, method: str, route: str) -> str:
    """The operationId, else the method and the path ("post_orders_order_id_returns"), in the characters and
    length OpenAI's API takes."""
    raw = operation_id if isinstance(operation_id, str) and operation_id else f"{method}_{route}"
    return re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9_-]", "_", raw)).strip("_")[:MAX_NAME]


def _parameter_key(resolver: _Resolver, parameter: Any) -> tuple[str, str]:
    name, place = (parameter.get("name"), parameter.get("in")) if isinstance(parameter, dict) else (None, None)
    if not isinstance(name, str) or place not in ("path", "query", "header", "cookie"):
        raise RecordError(resolver.path, resolver.where, "parameters", f"{name!r} needs a name and an 'in' of path, "
                                                                       f"query, header or cookie")
    return name, place


def _add_parameter(resolver: _Resolver, name: str, place: str, parameter: dict[str, Any],
                   properties: dict[str, Any], required: list[str]) -> None:
    if place == "cookie" or (place == "header" and name.lower() in IGNORED_HEADERS):
        return
    schema = _schema(resolver, parameter.get("schema") or _media_schema(parameter.get("content")),
                     f"parameters.{name}.schema")
    if parameter.get("description") and "description" not in schema:
        schema = {**schema, "description": parameter["description"]}
    properties[name] = schema
    if parameter.get("required") or place == "path":
        required.append(name)


def _add_body(resolver: _Resolver, body: Any, properties: dict[str, Any], required: list[str]) -> None:
    """The request body's object properties beside the parameters; any other body (or one whose property names
    a parameter has) as the property `body`."""
    if not isinstance(body, dict) or not isinstance(body.get("content"), dict) or not body["content"]:
        raise RecordError(resolver.path, resolver.where, "requestBody.content", "must name at least one media type")
    schema = _schema(resolver, _media_schema(body["content"]), "requestBody.content.schema")
    fields = schema.get("properties") if schema.get("type", "object") == "object" else None
    if isinstance(fields, dict) and fields and not set(fields) & set(properties) and set(schema) <= {
            "type", "properties", "required", "description", "title", "additionalProperties"}:
        properties.update(fields)
        required += _listed(resolver, schema.get("required"), "requestBody.content.schema.required") \
            if body.get("required") else []
        return
    if body.get("description") and "description" not in schema:
        schema = {**schema, "description": body["description"]}
    properties["body"] = schema
    if body.get("required"):
        required.append("body")


def _listed(resolver: _Resolver, value: Any, field: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise RecordError(resolver.path, resolver.where, field, "must be a list")
    return value


def _schema(resolver: _Resolver, value: Any, field: str) -> dict[str, Any]:
    if value is None or value is True:
        return {}
    if not isinstance(value, dict):
        raise RecordError(resolver.path, resolver.where, field, "must be a JSON Schema object")
    return value


def _media_schema(content: Any) -> dict[str, Any] | None:
    """The schema of the JSON media type (application/json or any +json), else of the first one."""
    if not isinstance(content, dict) or not content:
        return None
    media = next((m for m in content if str(m).split(";")[0].strip() == "application/json" or str(m).endswith("+json")),
                 next(iter(content)))
    entry = content[media]
    return entry.get("schema") if isinstance(entry, dict) else None


class _Resolver:
    """Replaces every `{"$ref": "#/..."}` inside a part of the document by what it points at (its other keys
    kept beside, as OpenAPI 3.1 allows). A reference met again inside itself (a recursive schema) becomes `{}`:
    any value."""

    def __init__(self, path: Path, document: dict[str, Any], where: str):
        self.path, self.document, self.where = path, document, where

    def resolve(self, node: Any, trail: tuple[str, ...] = ()) -> Any:
        if isinstance(node, list):
            return [self.resolve(value, trail) for value in node]
        if not isinstance(node, dict):
            return node
        if "$ref" not in node:
            return {key: self.resolve(value, trail) for key, value in node.items()}
        ref = node["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#/"):
            raise RecordError(self.path, self.where, "$ref", f"{ref!r}: only references inside the document "
                                                             f"(#/...) are followed")
        beside = {key: self.resolve(value, trail) for key, value in node.items() if key != "$ref"}
        if ref in trail:
            return beside
        target = self.resolve(self._pointed(ref), (*trail, ref))
        return {**target, **beside} if isinstance(target, dict) else target

    def _pointed(self, ref: str) -> Any:
        node: Any = self.document
        for part in ref[2:].split("/"):
            key = unquote(part).replace("~1", "/").replace("~0", "~")
            if isinstance(node, list) and key.isdigit() and int(key) < len(node):
                node = node[int(key)]
            elif isinstance(node, dict) and key in node:
                node = node[key]
            else:
                raise RecordError(self.path, self.where, "$ref", f"{ref!r} points at nothing in the document")
        return node
