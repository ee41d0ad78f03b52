"""The tools of the published τ-bench and τ²-bench domains and what each does to the data, so that an imported
benchmark run is scored with the benchmark's own effects rather than effects guessed from names.

Looked up in the benchmarks' own sources:
- τ²-bench (sierra-research/tau2-bench) marks every tool with `@is_tool(ToolType.READ|WRITE|THINK|GENERIC)`:
  src/tau2/domains/airline/tools.py, src/tau2/domains/retail/tools.py, src/tau2/domains/telecom/tools.py (the
  agent's) and src/tau2/domains/telecom/user_tools.py (the user's phone, which the simulated user operates).
- τ-bench (sierra-research/tau-bench) has one class per tool, without a mark, in tau_bench/envs/airline/tools/
  and tau_bench/envs/retail/tools/: the same functions τ²-bench ported (τ²-bench adds get_flight_status and
  get_item_details), each changing the data exactly when its τ²-bench port is WRITE.

lobeval has two effects: "write" changes business data, "read" does not. τ²-bench's THINK (a scratchpad that
"will not obtain new information or change the database") and GENERIC (calculate; transfer_to_human_agents,
which only answers "Transfer successful") change no data: they are reads here.

`tau2_tools` reads a τ²-bench domain's `tools.py` as published (with the `data_model.py` beside it) into
tools.json entries without importing it: `lobeval init --tools` and `lobeval import --tools` both take it.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from lobeval.core.errors import RecordError
from lobeval.core.records import read_text

_READ, _WRITE = "read", "write"

TAU2_AIRLINE = {
    "book_reservation": _WRITE, "cancel_reservation": _WRITE, "send_certificate": _WRITE,
    "update_reservation_baggages": _WRITE, "update_reservation_flights": _WRITE,
    "update_reservation_passengers": _WRITE,
    "get_reservation_details": _READ, "get_user_details": _READ, "list_all_airports": _READ,
    "search_direct_flight": _READ, "search_onestop_flight": _READ, "get_flight_status": _READ,
    "calculate": _READ, "transfer_to_human_agents": _READ, "think": _READ,
}
TAU2_RETAIL = {
    "cancel_pending_order": _WRITE, "exchange_delivered_order_items": _WRITE, "modify_pending_order_address": _WRITE,
    "modify_pending_order_items": _WRITE, "modify_pending_order_payment": _WRITE, "modify_user_address": _WRITE,
    "return_delivered_order_items": _WRITE,
    "find_user_id_by_name_zip": _READ, "find_user_id_by_email": _READ, "get_order_details": _READ,
    "get_product_details": _READ, "get_item_details": _READ, "get_user_details": _READ,
    "list_all_product_types": _READ, "calculate": _READ, "transfer_to_human_agents": _READ, "think": _READ,
}
TAU2_TELECOM = {
    "suspend_line": _WRITE, "resume_line": _WRITE, "send_payment_request": _WRITE, "enable_roaming": _WRITE,
    "disable_roaming": _WRITE, "refuel_data": _WRITE,
    "get_customer_by_phone": _READ, "get_customer_by_id": _READ, "get_customer_by_name": _READ,
    "get_details_by_id": _READ, "get_bills_for_customer": _READ, "get_data_usage": _READ,
    "transfer_to_human_agents": _READ,
}
TAU2_TELECOM_USER = {
    "set_network_mode_preference": _WRITE, "toggle_airplane_mode": _WRITE, "reseat_sim_card": _WRITE,
    "toggle_data": _WRITE, "toggle_roaming": _WRITE, "toggle_data_saver_mode": _WRITE, "set_apn_settings": _WRITE,
    "reset_apn_settings": _WRITE, "toggle_wifi": _WRITE, "toggle_wifi_calling": _WRITE, "connect_vpn": _WRITE,
    "disconnect_vpn": _WRITE, "grant_app_permission": _WRITE, "reboot_device": _WRITE, "make_payment": _WRITE,
    "check_status_bar": _READ, "check_network_status": _READ, "check_network_mode_preference": _READ,
    "run_speed_test": _READ, "check_sim_status": _READ, "check_data_restriction_status": _READ,
    "check_apn_settings": _READ, "check_wifi_status": _READ, "check_wifi_calling_status": _READ,
    "check_vpn_status": _READ, "check_installed_apps": _READ, "check_app_status": _READ,
    "check_app_permissions": _READ, "can_send_mms": _READ, "check_payment_request": _READ,
}
# τ-bench's own tool folders: the τ²-bench ports less the two tools τ²-bench added.
TAU_BENCH_AIRLINE = {name: effect for name, effect in TAU2_AIRLINE.items() if name != "get_flight_status"}
TAU_BENCH_RETAIL = {name: effect for name, effect in TAU2_RETAIL.items() if name != "get_item_details"}

DOMAINS = {"tau-bench": {"airline": TAU_BENCH_AIRLINE, "retail": TAU_BENCH_RETAIL},
           "tau2": {"airline": TAU2_AIRLINE, "retail": TAU2_RETAIL, "telecom": {**TAU2_TELECOM, **TAU2_TELECOM_USER}}}


def known_effect(name: str) -> str | None:
    """The effect of a tool of any published domain (a name means the same in every domain that has it), or None."""
    for domains in DOMAINS.values():
        for tools in domains.values():
            if name in tools:
                return tools[name]
    return None


# --- τ²-bench's tools.py, read as published -----------------------------------------------------------------

TOOL_TYPES = {"READ": _READ, "WRITE": _WRITE, "THINK": _READ, "GENERIC": _READ}
"""τ²-bench's ToolType as lobeval's effect (the mapping above: THINK and GENERIC change no data)."""
DATA_MODEL = "data_model.py"
"""The module beside a domain's tools.py that defines the types its tools take (Literal aliases, pydantic models)."""
_SCALARS = {"str": {"type": "string"}, "int": {"type": "integer"}, "float": {"type": "number"},
            "bool": {"type": "boolean"}, "dict": {"type": "object"}, "Dict": {"type": "object"},
            "list": {"type": "array"}, "List": {"type": "array"}, "Any": {}, "object": {}}
_ARRAYS = ("List", "list", "Sequence", "Tuple", "tuple", "Set", "set")
_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params|Returns?|Raises|Yields?|Examples?|Notes?|Attributes)"
                      r"\s*:\s*$")
_ARGUMENT = re.compile(r"^(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_DEPTH = 8
"""How deep models nested in models are written out; deeper (a model that holds itself) is left open ({})."""


def tau2_tools(path: str | Path) -> list[tuple[dict[str, Any], str]]:
    """(function definition, effect) of each `@is_tool(ToolType.X)` method of a τ²-bench domain's `tools.py`,
    read without importing it: the description is the docstring before its sections, each argument's
    description its line under Args, its JSON Schema type the annotation's (str, int, float, bool, List[...],
    Optional[...], dict; a Literal alias or an Enum as an enum; a pydantic model as an object with its fields),
    looked up in the `data_model.py` beside it; the effect is the ToolType's (TOOL_TYPES)."""
    path = Path(path)
    module = _parse(path)
    types = _Types()
    beside = path.parent / DATA_MODEL
    if beside.is_file():
        types.add(_parse(beside))
    types.add(module)
    found = []
    for node in ast.walk(module):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            kind = _tool_type(node)
            if kind is not None:
                if kind not in TOOL_TYPES:
                    raise RecordError(path, f"line {node.lineno}", "is_tool",
                                      f"ToolType.{kind} of {node.name}: expected one of {', '.join(TOOL_TYPES)}")
                found.append((_function(node, types), TOOL_TYPES[kind]))
    if not found:
        raise RecordError(path, "file", None, "defines no tool: no method is decorated @is_tool(ToolType.X)")
    return found


def _parse(path: Path) -> ast.Module:
    try:
        return ast.parse(read_text(path), filename=str(path))
    except SyntaxError as exc:
        raise RecordError(path, f"line {exc.lineno}", None, f"is not Python: {exc.msg}") from None


def _tool_type(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """X of a decorator `is_tool(ToolType.X)`, else None."""
    for decorator in node.decorator_list:
        if isinstance(decorator, ast.Call) and _name(decorator.func) == "is_tool" and decorator.args:
            kind = decorator.args[0]
            return kind.attr if isinstance(kind, ast.Attribute) else _name(kind)
    return None


def _name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else None


def _function(node: ast.FunctionDef | ast.AsyncFunctionDef, types: _Types) -> dict[str, Any]:
    description, documented = docstring_parts(ast.get_docstring(node) or "")
    arguments = [a for a in node.args.posonlyargs + node.args.args if a.arg not in ("self", "cls")]
    defaults = len(node.args.defaults)
    required = [a.arg for a in arguments[:len(arguments) - defaults]]
    properties = {}
    for argument in [*arguments, *node.args.kwonlyargs]:
        schema = types.schema(argument.annotation)
        if documented.get(argument.arg):
            schema = {**schema, "description": documented[argument.arg]}
        properties[argument.arg] = schema
    required += [a.arg for a, default in zip(node.args.kwonlyargs, node.args.kw_defaults) if default is None]
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    return {"name": node.name, "description": description or node.name, "parameters": parameters}


def docstring_parts(docstring: str) -> tuple[str, dict[str, str]]:
    """(description, {argument: its description}) of a Google-style docstring, as τ²-bench reads its tools'
    (docstring_parser; src/tau2/environment/tool.py): the description is the text before the first section,
    its first line and the rest joined by a blank line; an argument's description runs on over its indented
    lines."""
    lines = docstring.expandtabs().splitlines()
    start = next((i for i, line in enumerate(lines) if _SECTION.match(line.strip())), len(lines))
    first, _, rest = "\n".join(lines[:start]).strip().partition("\n")
    description = first.strip() + (f"\n\n{rest.strip()}" if rest.strip() else "")   # short + long, as τ² joins them
    arguments: dict[str, str] = {}
    section, indent, current = None, None, None
    for line in lines[start:]:
        stripped = line.strip()
        header = _SECTION.match(stripped)
        if header and len(line) - len(line.lstrip()) <= (indent or 0):
            section, indent, current = header.group(1), None, None
            continue
        if section not in ("Args", "Arguments", "Parameters", "Params") or not stripped:
            continue
        depth = len(line) - len(line.lstrip())
        indent = depth if indent is None else indent
        match = _ARGUMENT.match(stripped)
        if depth == indent and match:
            current = match.group(1)
            arguments[current] = match.group(2).strip()
        elif current is not None:
            arguments[current] = f"{arguments[current]} {stripped}".strip()
    return description, arguments


class _Types:
    """The names a tools.py's annotations use, from the modules read: type aliases (`CabinClass =
    Literal[...]`, `X = Annotated[..., Field(description=...)]`) and classes (pydantic models, Enums)."""

    def __init__(self) -> None:
        self.aliases: dict[str, ast.expr] = {}
        self.classes: dict[str, ast.ClassDef] = {}

    def add(self, module: ast.Module) -> None:
        for node in module.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self.aliases[node.targets[0].id] = node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None \
                    and _name(node.annotation) == "TypeAlias":
                self.aliases[node.target.id] = node.value
            elif isinstance(node, ast.ClassDef):
                self.classes[node.name] = node

    def schema(self, node: ast.expr | None, depth: int = 0) -> dict[str, Any]:
        """The JSON Schema of an annotation; {} (anything) for what is not known."""
        if node is None or depth > _DEPTH:
            return {}
        if isinstance(node, ast.Constant) and node.value is None:
            return {"type": "null"}
        if isinstance(node, ast.Constant) and isinstance(node.value, str):   # a forward reference "Model"
            try:
                return self.schema(ast.parse(node.value, mode="eval").body, depth)
            except SyntaxError:
                return {}
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self._union([node.left, node.right], depth)
        if isinstance(node, ast.Subscript):
            return self._generic(_name(node.value), node.slice, depth)
        name = _name(node)
        if name in self.aliases:
            return self.schema(self.aliases[name], depth + 1)
        if name in self.classes:
            return self._class(self.classes[name], depth + 1)
        return dict(_SCALARS.get(name or "", {}))

    def _generic(self, name: str | None, inner: ast.expr, depth: int) -> dict[str, Any]:
        items = list(inner.elts) if isinstance(inner, ast.Tuple) else [inner]
        if name == "Literal":
            values = [item.value for item in items if isinstance(item, ast.Constant)]
            kinds = {type(value) for value in values}
            schema: dict[str, Any] = {"enum": values}
            if len(kinds) == 1:
                schema = {**_json_type(kinds.pop()), **schema}
            return schema
        if name == "Optional":
            return _nullable(self.schema(items[0], depth))
        if name == "Union":
            return self._union(items, depth)
        if name == "Annotated":
            schema = self.schema(items[0], depth)
            described = next((_keyword(item, "description") for item in items[1:] if isinstance(item, ast.Call)), None)
            return {**schema, "description": described} if described else schema
        if name in _ARRAYS:
            inside = self.schema(items[0], depth) if items and not (name in ("Tuple", "tuple") and len(items) > 1) \
                else {}
            return {"type": "array", "items": inside} if inside else {"type": "array"}
        if name in ("Dict", "dict", "Mapping"):
            values = self.schema(items[1], depth) if len(items) == 2 else {}
            return {"type": "object", "additionalProperties": values} if values else {"type": "object"}
        return self.schema(ast.Name(id=name or ""), depth)

    def _union(self, items: list[ast.expr], depth: int) -> dict[str, Any]:
        """`A | B`: None makes it nullable; a bare `dict` beside a model (τ²'s `FlightInfo | dict`, the model
        or its fields as a plain dict) is the model."""
        flat: list[ast.expr] = []
        for item in items:
            if isinstance(item, ast.BinOp) and isinstance(item.op, ast.BitOr):
                flat += [item.left, item.right]
            elif isinstance(item, ast.Subscript) and _name(item.value) in ("Union", "Optional"):
                flat += list(item.slice.elts) if isinstance(item.slice, ast.Tuple) else [item.slice]
            else:
                flat.append(item)
        nullable = any(isinstance(item, ast.Constant) and item.value is None or _name(item) == "None" for item in flat)
        schemas = [self.schema(item, depth) for item in flat
                   if not (isinstance(item, ast.Constant) and item.value is None or _name(item) == "None")]
        if any(s.get("properties") for s in schemas):
            schemas = [s for s in schemas if s != {"type": "object"}]
        unique = [s for index, s in enumerate(schemas) if s not in schemas[:index]]
        schema = unique[0] if len(unique) == 1 else ({"anyOf": unique} if unique else {})
        return _nullable(schema) if nullable else schema

    def _class(self, node: ast.ClassDef, depth: int) -> dict[str, Any]:
        bases = [_name(base) for base in node.bases]
        if "Enum" in bases or any(base in ("StrEnum", "IntEnum") for base in bases):
            values = [item.value.value for item in node.body if isinstance(item, ast.Assign)
                      and isinstance(item.value, ast.Constant)]
            kinds = {type(value) for value in values}
            return {**(_json_type(kinds.pop()) if len(kinds) == 1 else {}), "enum": values}
        properties: dict[str, Any] = {}
        required: list[str] = []
        for base in bases:   # fields of the models it extends first, as pydantic orders them
            inherited = self._class(self.classes[base], depth + 1) if base in self.classes else {}
            properties.update(inherited.get("properties") or {})
            required += [name for name in inherited.get("required") or [] if name not in required]
        for item in node.body:
            if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)) \
                    or _name(item.annotation) == "ClassVar" or item.target.id.startswith("_"):
                continue
            field = item.target.id
            schema = self.schema(item.annotation, depth)
            described = _keyword(item.value, "description") if isinstance(item.value, ast.Call) else None
            properties[field] = {**schema, "description": described} if described else schema
            if _required(item.value):
                required += [field] if field not in required else []
            elif field in required:
                required.remove(field)
        schema = {"type": "object", "properties": properties}
        if required:
            schema["required"] = required
        docstring = ast.get_docstring(node)
        return {**schema, "description": docstring.strip()} if docstring else schema


def _json_type(kind: type) -> dict[str, Any]:
    return {str: {"type": "string"}, int: {"type": "integer"}, float: {"type": "number"},
            bool: {"type": "boolean"}}.get(kind, {})


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` that also takes null: "null" added to its type (and its enum), or anyOf with null."""
    kind = schema.get("type")
    if isinstance(kind, str):
        nullable = {**schema, "type": [kind, "null"]}
        return {**nullable, "enum": [*schema["enum"], None]} if "enum" in schema else nullable
    return {"anyOf": [schema, {"type": "null"}]} if schema else {}


def _keyword(call: ast.Call, name: str) -> Any:
    """The constant value of a call's keyword argument `name` (Field(description=...)), else None."""
    for keyword in call.keywords:
        if keyword.arg == name and isinstance(keyword.value, ast.Constant):
            return keyword.value.value
    return None


def _required(value: ast.expr | None) -> bool:
    """Whether a model field with this right-hand side has no default: none at all, or `Field(...)` / `Field(
    description=...)` without a default (pydantic's own rule)."""
    if value is None:
        return True
    if not (isinstance(value, ast.Call) and _name(value.func) == "Field"):
        return False
    if any(keyword.arg in ("default", "default_factory") for keyword in value.keywords):
        return False
    return not value.args or (isinstance(value.args[0], ast.Constant) and value.args[0].value is Ellipsis)
