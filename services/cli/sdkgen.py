"""The bot SDK's wire structs, written from the recorded wire schema (``make schema``).

The SDK (services/sdk) is a distribution of its own and imports nothing of the server, yet it
must read exactly what the gateway writes. So its structs are not written by hand: this module
turns the recorded ``events/schemas/wire-N.json`` — the server's stream lines, events, view,
socket frames and answers, as ``python -m services.cli.schemas record`` wrote them — into one
module of the SDK, ``domino_sdk/wire.py``. ``record`` writes it with the JSON file, and
``check`` (in ``make lint``) fails when it is not what the recorded file gives.

A change flows one way: a server struct changes, the check fails, ``make schema`` records the
schema and writes the SDK's module, and the SDK reads the new shape.

What the SDK reads differently from the server is said here, once:

- it never forbids unknown fields: a reader skips a field added later (docs/store.md);
- the shapes the SDK defines itself (the request bodies, ``domino_sdk.bodies``, which the
  gateway decodes with) are imported, not written again;
- the events subclass the SDK's ``Event``, and a field holding any event reads one of a type
  it does not know as ``UnknownEvent`` (``SeenEvent``), from ``domino_sdk.base``;
- ``Rules`` gains the SDK's helpers (``sides``, ``side_of``), a mixin of no fields;
- a wire name that is a Python keyword (``from``) is read under another attribute.

The structs are frozen and keyword-only; arrays are tuples, fields are in alphabetical order
after the required ones (the recorded file keeps no order: a reorder is no change).
"""

from __future__ import annotations

import importlib
import keyword
import subprocess
import sys
import typing
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import msgspec

HEADER = '''\
"""The protocol's wire shapes as the bot SDK reads them: generated from
events/schemas/wire-{version}.json by `make schema`; do not edit.

Every struct the gateway writes or reads that the server defines: its stream lines, the
events as a seat sees them, the view, the socket's frames and its answers. The server's
structs are the one source: ``make schema`` records their JSON Schema and writes this module
from it (services/cli/sdkgen.py); ``make lint`` fails when it is not what that file gives.
The SDK's own pieces (request bodies, the event base and its fallback, helpers) are
imported; domino_sdk.model, domino_sdk.views and domino_sdk.protocol document what a bot uses.
"""
'''

OWN = "domino_sdk.bodies"
"""The SDK's own shapes, which the server imports: imported here, never written again."""
BASE = "domino_sdk.base"
BASES = {"AnyEvent": "Event"}
"""A union of the schema whose members subclass a base of the SDK's (from BASE)."""
OPEN = {"AnyEvent": ("SeenEvent", "UnknownEvent")}
"""A union read with the SDK's fallback: a field holding it holds the first name, the union
and the second (from BASE), an event of a type the SDK does not know."""
MIXINS = {"Rules": "RulesHelpers"}
"""A struct that gains the SDK's helpers: a mixin of methods only (from BASE)."""
NAMES = {"from": "challenger"}
"""A wire name that is a Python keyword, and the attribute it is read as."""


class UnsupportedSchema(ValueError):
    """Raised when the recorded schema holds a form this generator does not write yet."""


def own_names(module: ModuleType) -> set[str]:
    """The public structs and unions of structs a module of the SDK defines."""
    found: set[str] = set()
    for name, value in vars(module).items():
        if name.startswith("_"):
            continue
        is_struct = isinstance(value, type) and issubclass(value, msgspec.Struct)
        if is_struct and value.__module__ == module.__name__:
            found.add(name)
        elif typing.get_origin(value) is not None and typing.get_args(value):
            members = typing.get_args(value)
            if all(isinstance(m, type) and m.__module__ == module.__name__ for m in members):
                found.add(name)
    return found


class _Writer:
    """One pass over a recorded document: the structs, the unions and what they import."""

    def __init__(self, doc: Mapping[str, Any], own: set[str]) -> None:
        self.defs: dict[str, Any] = dict(doc["$defs"])
        self.roots: dict[str, Any] = dict(doc["roots"])
        self.tags: dict[str, list[Any]] = dict(doc["tags"])
        self.own = own
        self.imported: set[str] = set()  # from OWN
        self.base: set[str] = set()  # from BASE
        self.uses_any = False
        self.uses_literal = False
        self.unions = {
            name: frozenset(self._refs(schema))
            for name, schema in self.roots.items()
            if "anyOf" in schema and self._refs(schema)
        }
        self.based: dict[str, str] = {
            member: base
            for union, base in BASES.items()
            for member in self.unions.get(union, frozenset())
        }

    def _refs(self, schema: Mapping[str, Any]) -> list[str]:
        members = schema.get("anyOf", ())
        if not all("$ref" in m for m in members):
            return []
        return [m["$ref"].rsplit("/", 1)[-1] for m in members]

    # -- types ---------------------------------------------------------------------------------

    def ref(self, name: str) -> str:
        if name in self.own:
            self.imported.add(name)
        elif name not in self.defs:
            raise UnsupportedSchema(f"a reference to {name}, which the schema does not define")
        elif "properties" not in self.defs[name]:
            raise UnsupportedSchema(f"{name} is not a struct: only structs are written")
        return name

    def union_name(self, refs: frozenset[str]) -> str | None:
        """The root union with exactly these members, as a field names it."""
        for name, members in sorted(self.unions.items()):
            if members == refs:
                if name in OPEN:
                    seen, fallback = OPEN[name]
                    self.base.add(fallback)
                    return seen
                if name in self.own:
                    self.imported.add(name)
                return name
        return None

    def type(self, schema: Any) -> str:
        if (
            schema is True
            or schema == {}
            or (isinstance(schema, dict) and not schema.keys() - {"default", "title"})
        ):
            self.uses_any = True
            return "Any"
        if not isinstance(schema, dict):
            raise UnsupportedSchema(f"a schema {schema!r}")
        if "$ref" in schema:
            return self.ref(schema["$ref"].rsplit("/", 1)[-1])
        if "enum" in schema:
            self.uses_literal = True
            return "Literal[{}]".format(", ".join(_literal(v) for v in schema["enum"]))
        if "anyOf" in schema:
            members = schema["anyOf"]
            refs = [m["$ref"].rsplit("/", 1)[-1] for m in members if set(m) == {"$ref"}]
            rest = [m for m in members if set(m) != {"$ref"}]
            named = self.union_name(frozenset(refs)) if len(refs) > 1 else None
            parts = [named] if named else [self.type(m) for m in members if set(m) == {"$ref"}]
            parts += [self.type(m) for m in rest]
            return " | ".join(_nulls_last(parts))
        kind = schema.get("type")
        if isinstance(kind, list):
            return " | ".join(_nulls_last([self.type({**schema, "type": k}) for k in kind]))
        if kind == "array":
            if "prefixItems" in schema:
                return "tuple[{}]".format(", ".join(self.type(s) for s in schema["prefixItems"]))
            return f"tuple[{self.type(schema.get('items', {}))}, ...]"
        if kind == "object":
            values = schema.get("additionalProperties", {})
            return f"dict[str, {self.type(values)}]"
        scalars = {"integer": "int", "number": "float", "string": "str", "boolean": "bool"}
        if kind == "null":
            return "None"
        if kind in scalars:
            return scalars[kind]
        raise UnsupportedSchema(f"a schema {schema!r}")

    # -- structs and unions --------------------------------------------------------------------

    def struct(self, name: str) -> str:
        schema = self.defs[name]
        tag = self.tags.get(name)
        bases = ["msgspec.Struct"]
        if name in self.based:
            bases = [self.based[name]]
            self.base.add(self.based[name])
        if name in MIXINS:
            bases.append(MIXINS[name])
            self.base.add(MIXINS[name])
        options = ["frozen=True", "kw_only=True"]
        if tag is not None:
            if name not in self.based:
                options.append(f"tag_field={_literal(tag[0])}")
            options.append(f"tag={_literal(tag[1])}")
        lines = [f"class {name}({', '.join(bases + options)}):"]
        required = set(schema.get("required", ()))
        properties: dict[str, Any] = schema.get("properties", {})
        fields = [f for f in properties if not (tag and f == tag[0])]
        fields.sort(key=lambda f: (f not in required, f))
        for wire_name in fields:
            lines.append("    " + self.field(name, wire_name, properties[wire_name], required))
        if len(lines) == 1:
            lines.append("    pass")
        return "\n".join(lines)

    def field(self, struct: str, wire_name: str, schema: Any, required: set[str]) -> str:
        attribute = wire_name
        if keyword.iskeyword(wire_name) or not wire_name.isidentifier():
            if wire_name not in NAMES:
                raise UnsupportedSchema(f"{struct}.{wire_name}: add it to sdkgen.NAMES")
            attribute = NAMES[wire_name]
        annotation = self.type(schema)
        options = [] if wire_name in required else [_default(struct, wire_name, schema)]
        if attribute != wire_name:
            options.append(f"name={_literal(wire_name)}")
        if not options:
            return f"{attribute}: {annotation}"
        if len(options) == 1 and not options[0].startswith(("default_factory=", "name=")):
            return f"{attribute}: {annotation} = {options[0].removeprefix('default=')}"
        return f"{attribute}: {annotation} = msgspec.field({', '.join(options)})"

    def union(self, name: str) -> str:
        members = sorted(self.unions[name])
        for member in members:
            self.ref(member)
        return f"{name} = {' | '.join(members)}"

    def module(self, version: int) -> str:
        structs = [self.struct(name) for name in sorted(self.defs) if name not in self.own]
        unions = [self.union(n) for n in sorted(self.unions) if n not in self.own]
        for name, (seen, fallback) in sorted(OPEN.items()):
            if name in self.unions:
                self.base.add(fallback)
                unions.append(f"{seen} = {name} | {fallback}")
        imports = ["from __future__ import annotations", ""]
        used = {"Any": self.uses_any, "Literal": self.uses_literal}
        typing_names = [name for name, needed in used.items() if needed]
        if typing_names:
            imports.append(f"from typing import {', '.join(typing_names)}")
            imports.append("")
        imports += ["import msgspec", ""]
        if self.base:
            imports.append(f"from {BASE} import {', '.join(sorted(self.base))}")
        if self.imported:
            imports.append(f"from {OWN} import {', '.join(sorted(self.imported))}")
        body = "\n\n\n".join([*structs, "\n".join(unions)] if unions else structs)
        return HEADER.format(version=version) + "\n" + "\n".join(imports) + "\n\n\n" + body + "\n"


def _nulls_last(parts: list[str]) -> list[str]:
    unique = list(dict.fromkeys(parts))
    return [p for p in unique if p != "None"] + [p for p in unique if p == "None"]


def _literal(value: Any) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def _default(struct: str, name: str, schema: Mapping[str, Any]) -> str:
    if "default" not in schema:  # a default made by a factory: the schema cannot show it
        if "$ref" in schema:
            return f"default_factory={schema['$ref'].rsplit('/', 1)[-1]}"
        if schema.get("type") == "array":
            return "default=()"
        if schema.get("type") == "object":
            return "default_factory=dict"
        raise UnsupportedSchema(f"{struct}.{name} is optional without a default")
    value = schema["default"]
    if value is None or isinstance(value, bool | int | float | str):
        return f"default={_literal(value)}"
    if value == []:
        return "default=()"
    if value == {}:
        return "default_factory=dict"
    raise UnsupportedSchema(f"{struct}.{name} has a default of {value!r}")


def source(doc: Mapping[str, Any], own: set[str]) -> str:
    """The SDK's wire module for a recorded wire document, as ruff formats it."""
    text = _Writer(doc, own).module(int(doc["version"]))
    return formatted(text)


def formatted(text: str) -> str:
    """Python source as the project's formatter lays it out (line length 100)."""
    command = [sys.executable, "-m", "ruff", "format", "--isolated", "--line-length", "100"]
    command += ["--target-version", "py311", "-"]
    done = subprocess.run(command, input=text, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise UnsupportedSchema(f"the generated module does not parse: {done.stderr.strip()}")
    return done.stdout


def own_shapes() -> set[str]:
    """The names of the SDK's own shapes (its request bodies)."""
    return own_names(importlib.import_module(OWN))


def write(doc: Mapping[str, Any], path: Path) -> bool:
    """Write the SDK's module for ``doc`` at ``path``; whether it changed."""
    text = source(doc, own_shapes())
    if path.exists() and path.read_text() == text:
        return False
    path.write_text(text)
    return True
