"""The JSON Schema of every stored and every wire shape, recorded per version, and the check
that a change to them keeps the compatibility rules (docs/store.md, "Compatibility rules").

``python -m services.cli.schemas check`` (in ``make lint``) compares the shapes the code has
now with the file recorded for the current version and exits 1 naming each change, the rule
it breaks and what to do; ``python -m services.cli.schemas record`` (``make schema``) writes the
current version's file, and refuses to when a change needs a new version first. From the
recorded wire file, ``record`` also writes the bot SDK's wire structs
(``domino_sdk/wire.py``, services/cli/sdkgen.py), and ``check`` fails when that module is not
what the file gives: the SDK reads what the server writes, from one source.

Two families of shapes, each with its own version and its own files in ``events/schemas/``:

- stored (``stored-N.json``, N = ``SCHEMA`` in events/envelope.py): the envelopes of events and
  commands, and the turn and rejection messages, as they sit in Redis and the archive. A
  change that breaks a rule needs a new schema and an upcaster from the one before
  (events/upcast.py);
- wire (``wire-N.json``, N = ``PROTOCOL``, the ``Domino-Protocol`` version): the gateway's
  stream lines and answers and the request bodies. A change that breaks a rule needs a new
  version of the protocol.

The check is structural: it walks the two schemas (struct fields, required or not, types, tags,
literal values, defaults), so a docstring or the order of fields or of a union's members is
no change. A file is never rewritten once its version is behind the code's: older files are
history, and what a new version changed is read against them.
"""

from __future__ import annotations

import argparse
import json
import sys
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, NamedTuple

import msgspec
import msgspec.inspect as mi

import events
from events.envelope import SCHEMA, CommandEnvelope, Envelope
from events.model import AnyEvent, Move
from events.upcast import UPCASTERS
from events.wire import Rejected, TurnMessage
from services.cli import sdkgen
from services.gateway import channel_wire, lobby_protocol, protocol
from services.gateway.protocol import PROTOCOL
from services.projections.projector import Summary

Document = dict[str, Any]
"""A recorded schema: ``shapes``, ``version``, ``roots`` (name to schema), ``tags`` (struct
name to its tag field and value) and ``$defs`` (the structs and enums the roots refer to)."""
Mode = Literal["BACKWARD", "FORWARD"]

SCHEMAS = Path(events.__file__).parent / "schemas"
"""Where the recorded files are: beside the stored shapes, in the source tree checked."""
_REF = "#/$defs/{name}"
SDK_MODULE = Path(__file__).resolve().parents[1] / "sdk" / "domino_sdk" / "wire.py"
"""The SDK's module of wire structs, written from the recorded wire file (sdkgen.py)."""
SDK_HOMES = ("domino_sdk.protocol", sdkgen.OWN)
"""Where the SDK defines the request bodies the gateway decodes (re-exported by protocol)."""


# -- the rules ---------------------------------------------------------------------------------


class Rule(NamedTuple):
    """A kind of change, the compatibility it breaks (none: FULL) and why, in words where
    ``{before}`` is what was written in the version before and ``{old}`` its readers."""

    change: str
    breaks: tuple[Mode, ...]
    why: str


FIELD_ADDED_WITH_DEFAULT = Rule(
    "a field added with a default",
    (),
    "{before} lack it and read as its default; {old} skip it",
)
FIELD_ADDED_WITHOUT_DEFAULT = Rule(
    "a field added without a default", ("BACKWARD",), "{before} lack it"
)
FIELD_ADDED_TO_CLOSED = Rule(
    "a field added to a struct that forbids unknown fields",
    ("FORWARD",),
    "{old} refuse a field they do not know",
)
FIELD_REMOVED_WITH_DEFAULT = Rule(
    "a field with a default removed (or renamed)",
    ("BACKWARD",),
    "{before} hold it: a reader drops what it says, or refuses it where unknown fields are "
    "forbidden",
)
FIELD_REMOVED_WITHOUT_DEFAULT = Rule(
    "a field without a default removed (or renamed)",
    ("BACKWARD", "FORWARD"),
    "{before} hold it, and {old} require it",
)
DEFAULT_GIVEN = Rule(
    "a required field given a default",
    ("FORWARD",),
    "{old} require it, and a writer may now leave it out",
)
DEFAULT_TAKEN = Rule("a field's default removed", ("BACKWARD",), "{before} may lack it")
DEFAULT_CHANGED = Rule(
    "a default changed",
    ("BACKWARD", "FORWARD"),
    "it changes what {before} mean where they lack the field",
)
TYPE_CHANGED = Rule(
    "a type changed",
    ("BACKWARD", "FORWARD"),
    "{before} hold the old type, and {old} cannot read the new one",
)
TYPE_NARROWED = Rule(
    "a type narrowed (int | None to int, a tighter bound)",
    ("BACKWARD",),
    "{before} may hold what it no longer takes",
)
TYPE_WIDENED = Rule(
    "a type widened (int to int | None, a looser bound)",
    ("FORWARD",),
    "{old} fail on what it now also takes",
)
TAG_ADDED = Rule(
    "a tag added (a new event, command or line type)",
    ("FORWARD",),
    "{old} fail on a tag they do not know: consumers deploy before producers",
)
TAG_REMOVED = Rule("a tag removed", ("BACKWARD",), "{before} hold it")
LITERAL_ADDED = Rule(
    "a literal value added", ("FORWARD",), "{old} fail on a value they do not know"
)
LITERAL_REMOVED = Rule("a literal value removed", ("BACKWARD",), "{before} may hold it")
STRUCT_CLOSED = Rule(
    "a struct made to forbid unknown fields",
    ("BACKWARD",),
    "{before} may hold fields it now refuses",
)
STRUCT_OPENED = Rule(
    "a struct made to accept unknown fields", (), "it refuses nothing it read before"
)
SHAPE_ADDED = Rule("a shape added", (), "nothing was written in it before")
SHAPE_REMOVED = Rule("a shape removed", ("BACKWARD",), "{before} hold it")
RENAMED = Rule(
    "a struct's class renamed", (), "class names are not written, only tags and field names"
)
RECORD_OUTDATED = Rule(
    "the recorded file differs in nothing the check compares", (), "the shapes are the same"
)

RULES = (
    FIELD_ADDED_WITH_DEFAULT,
    FIELD_ADDED_WITHOUT_DEFAULT,
    FIELD_ADDED_TO_CLOSED,
    FIELD_REMOVED_WITH_DEFAULT,
    FIELD_REMOVED_WITHOUT_DEFAULT,
    DEFAULT_GIVEN,
    DEFAULT_TAKEN,
    DEFAULT_CHANGED,
    TYPE_CHANGED,
    TYPE_NARROWED,
    TYPE_WIDENED,
    TAG_ADDED,
    TAG_REMOVED,
    LITERAL_ADDED,
    LITERAL_REMOVED,
    STRUCT_CLOSED,
    STRUCT_OPENED,
    SHAPE_ADDED,
    SHAPE_REMOVED,
    RENAMED,
    RECORD_OUTDATED,
)
"""Every rule, in the order of docs/store.md's table."""


@dataclass(frozen=True)
class Change:
    """One difference between two versions of the shapes: where (``TilePlayed
    (tile_played).end``), what (``renamed or removed``) and the rule it falls under."""

    where: str
    what: str
    rule: Rule

    @property
    def breaks(self) -> tuple[Mode, ...]:
        """The compatibility the change breaks; none: it keeps FULL."""
        return self.rule.breaks


# -- the two families of shapes ----------------------------------------------------------------


@dataclass(frozen=True)
class Family:
    """Stored or wire shapes: their roots, their version and how a new version is made."""

    name: Literal["stored", "wire"]
    constant: str  # the version's name in the code
    home: str  # the file that holds it
    before: str  # what was written in version {n}, in the rules' words
    old: str  # who reads version {n}
    upcasts: bool  # a new version needs an upcaster from the one before

    def fix(self, version: int) -> str:
        """What to do about a change that breaks a rule of ``version``'s shapes."""
        bump = f"bump {self.constant} in {self.home} to {version + 1}"
        if self.upcasts:
            return f"{bump} and add an upcaster from {version} (events/upcast.py), then make schema"
        return f"{bump}, then make schema"

    def path(self, version: int, directory: Path = SCHEMAS) -> Path:
        """The recorded file of ``version``."""
        return directory / f"{self.name}-{version}.json"


STORED = Family(
    "stored",
    "SCHEMA",
    "events/envelope.py",
    "logs written before",
    "readers of schema {n}",
    upcasts=True,
)
WIRE = Family(
    "wire",
    "PROTOCOL",
    "services/sdk/domino_sdk/protocol.py",
    "messages of protocol {n}",
    "clients and gateways of protocol {n}",
    upcasts=False,
)


def stored_roots() -> dict[str, Any]:
    """The stored shapes: what a match log, a command stream and a turns stream hold."""
    return {
        "Envelope": Envelope,
        "CommandEnvelope": CommandEnvelope,
        "TurnMessage": TurnMessage,
        "Rejected": Rejected,
    }


def wire_roots() -> dict[str, Any]:
    """The wire shapes: every struct and tagged union of them that the gateway's protocol
    modules declare (its lines and answers, the SDK's request bodies it re-exports, the
    lobby's bodies, answers and lines, and the account channel's frames), the summary GET
    /matches lists, and the unions of the events and of the moves a view lists (the SDK's
    ``AnyEvent`` and ``Move``)."""
    homes = {protocol.__name__, lobby_protocol.__name__, channel_wire.__name__, *SDK_HOMES}
    roots = _declared(protocol, homes) | _declared(lobby_protocol, homes)
    roots |= _declared(channel_wire, homes)
    roots["Summary"] = Summary
    roots["AnyEvent"] = AnyEvent
    roots["Move"] = Move
    return roots


def _declared(module: ModuleType, homes: set[str]) -> dict[str, Any]:
    """The public structs a module names that are defined in one of ``homes``, and its unions
    made only of them."""

    def home(value: Any) -> bool:
        return (
            isinstance(value, type)
            and issubclass(value, msgspec.Struct)
            and value.__module__ in homes
        )

    found: dict[str, Any] = {}
    for name, value in vars(module).items():
        members = typing.get_args(value) if typing.get_origin(value) is not None else ()
        if not name.startswith("_") and (home(value) or (members and all(map(home, members)))):
            found[name] = value
    return found


# -- generating and reading documents ----------------------------------------------------------


def document(family: Family, version: int, roots: Mapping[str, Any]) -> Document:
    """The recorded form of ``roots``: msgspec's JSON Schema without descriptions, with every
    list whose order means nothing sorted, and the tag of every tagged struct; plain JSON."""
    names = sorted(roots)
    schemas, defs = msgspec.json.schema_components([roots[n] for n in names], ref_template=_REF)
    doc = {
        "shapes": family.name,
        "version": version,
        "roots": {name: _canonical(schema) for name, schema in zip(names, schemas, strict=True)},
        "tags": _tags(roots.values()),
        "$defs": {name: _canonical(schema) for name, schema in defs.items()},
    }
    plain: Document = json.loads(text(doc))  # as it reads back: a default of () is []
    return plain


def generated(family: Family) -> Document:
    """The document of the shapes the code has now, at its current version."""
    if family is STORED:
        return document(STORED, SCHEMA, stored_roots())
    return document(WIRE, PROTOCOL, wire_roots())


def current_version(family: Family) -> int:
    """The version the code is at: SCHEMA or PROTOCOL."""
    return SCHEMA if family is STORED else PROTOCOL


def text(doc: Document) -> str:
    """A document as it is written: sorted keys, indented, one newline at the end."""
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def recorded(family: Family, directory: Path = SCHEMAS) -> dict[int, Document]:
    """The recorded documents of a family, by version."""
    found: dict[int, Document] = {}
    for path in directory.glob(f"{family.name}-*.json"):
        number = path.stem.removeprefix(f"{family.name}-")
        if number.isdigit():
            found[int(number)] = json.loads(path.read_text())
    return found


def _canonical(node: Any) -> Any:
    """A schema without its descriptions, its unions, required fields and literal values in
    one order (the order of a union's members or of fields changes nothing)."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "description":
            continue
        if key in ("properties", "$defs"):
            out[key] = {name: _canonical(schema) for name, schema in value.items()}
        elif key in ("items", "additionalProperties"):
            out[key] = _canonical(value)
        elif key == "prefixItems":
            out[key] = [_canonical(schema) for schema in value]
        elif key in ("anyOf", "oneOf"):
            out[key] = sorted((_canonical(schema) for schema in value), key=_sort_key)
        elif key in ("required", "enum"):
            out[key] = sorted(value, key=_sort_key)
        else:
            out[key] = value
    return out


def _sort_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _tags(types: Iterable[Any]) -> dict[str, list[Any]]:
    """Each tagged struct's tag field and tag, by class name (the schema's title)."""
    structs: dict[type, mi.StructType] = {}
    for info in mi.multi_type_info(list(types)):
        _collect_structs(info, structs)
    tags: dict[str, list[Any]] = {}
    for cls, info in structs.items():
        if info.tag is None:
            continue
        tag = [info.tag_field, info.tag]
        if tags.setdefault(cls.__name__, tag) != tag:
            raise ValueError(f"two tagged structs are named {cls.__name__}: rename one")
    return dict(sorted(tags.items()))


def _collect_structs(info: Any, found: dict[type, mi.StructType]) -> None:
    """Every struct type reached from ``info`` (an inspected type, or a field of one)."""
    if isinstance(info, mi.StructType):
        if info.cls in found:
            return
        found[info.cls] = info
    if not isinstance(info, mi.Type | mi.Field):
        return
    for value in msgspec.structs.astuple(info):
        for part in value if isinstance(value, tuple) else (value,):
            _collect_structs(part, found)


# -- comparing two documents -------------------------------------------------------------------

_LOWER_BOUNDS = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
_UPPER_BOUNDS = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
_EXACT = ("pattern", "format", "multipleOf")
_VERSION_FIELDS = ("schema", "protocol")
"""Fields whose default is the version itself: a bump changes it, and that is no change."""


class _Side:
    """One document, with its references resolved."""

    def __init__(self, doc: Document) -> None:
        self.doc = doc
        self.defs: dict[str, Any] = doc.get("$defs", {})
        self.tags: dict[str, list[Any]] = doc.get("tags", {})

    def resolve(self, ref: str) -> tuple[str, Any]:
        name = ref.rsplit("/", 1)[-1]
        return name, self.defs[name]

    def label(self, name: str) -> str:
        """A struct as the messages name it: ``TilePlayed (tile_played)``."""
        tag = self.tags.get(name)
        return f"{name} ({tag[1]})" if tag else name


@dataclass
class _Comparison:
    old: _Side
    new: _Side
    versions: tuple[int, int]
    changes: list[Change] = field(default_factory=list)
    _seen: set[tuple[str, str]] = field(default_factory=set)

    def note(self, where: str, what: str, rule: Rule) -> None:
        self.changes.append(Change(where, what, rule))

    def roots(self) -> None:
        old_roots: dict[str, Any] = self.old.doc.get("roots", {})
        new_roots: dict[str, Any] = self.new.doc.get("roots", {})
        for name in sorted(old_roots.keys() & new_roots.keys()):
            self.types(name, old_roots[name], new_roots[name])
        gone = sorted(old_roots.keys() - new_roots.keys())
        came = sorted(new_roots.keys() - old_roots.keys())
        for name in gone:
            twin = next((n for n in came if self._same(old_roots[name], new_roots[n])), None)
            if twin is None:
                self.note(name, "removed", SHAPE_REMOVED)
            else:
                came.remove(twin)
                self.note(twin, f"renamed from {name}", RENAMED)
        for name in came:
            self.note(name, "added", SHAPE_ADDED)

    def _same(self, old: Any, new: Any) -> bool:
        """Whether two roots differ in nothing but names."""
        probe = _Comparison(self.old, self.new, self.versions)
        probe.types("", old, new)
        return all(change.rule is RENAMED for change in probe.changes)

    def types(self, where: str, old_node: Any, new_node: Any) -> None:
        """Compare two schemas of one place: a field, an item, a root."""
        old = _alternatives(old_node, self.old)
        new = _alternatives(new_node, self.new)
        narrowed: list[str] = []
        widened: list[str] = []
        for key in sorted(old.keys() - new.keys()):
            if _covered(key, new):
                continue
            if key.startswith("tag:"):
                self.note(where, f"tag {_shown(key, old)} removed", TAG_REMOVED)
            elif key.startswith("value:"):
                self.note(where, f"value {_shown(key, old)} removed", LITERAL_REMOVED)
            else:
                narrowed.append(_shown(key, old))
        for key in sorted(new.keys() - old.keys()):
            if _covered(key, old):
                continue
            if key.startswith("tag:"):
                self.note(where, f"tag {_shown(key, new)} added", TAG_ADDED)
            elif key.startswith("value:"):
                self.note(where, f"value {_shown(key, new)} added", LITERAL_ADDED)
            else:
                widened.append(_shown(key, new))
        if narrowed and widened:
            was, now = _described(old), _described(new)
            self.note(where, f"type changed from {was} to {now}", TYPE_CHANGED)
        elif narrowed:
            self.note(where, f"no longer takes {' | '.join(narrowed)}", TYPE_NARROWED)
        elif widened:
            self.note(where, f"now also takes {' | '.join(widened)}", TYPE_WIDENED)
        for key in sorted(old.keys() & new.keys()):
            self._alike(where, key, old[key], new[key])

    def _alike(self, where: str, key: str, old: Any, new: Any) -> None:
        """Compare two alternatives of the same kind: their insides and bounds."""
        if key == "struct" or key.startswith("tag:"):
            self.structs(old, new)
            return
        if key.startswith("value:"):
            return
        if key == "array":
            self._arrays(where, old, new)
        elif key == "dict" and isinstance(old.get("additionalProperties"), dict):
            extra = new.get("additionalProperties")
            if isinstance(extra, dict):
                self.types(f"{where}{{}}", old["additionalProperties"], extra)
        self._bounds(where, old, new)

    def _arrays(self, where: str, old: Any, new: Any) -> None:
        old_items: list[Any] = old.get("prefixItems", [])
        new_items: list[Any] = new.get("prefixItems", [])
        old_rest, new_rest = old.get("items"), new.get("items")
        for i in range(max(len(old_items), len(new_items))):
            was = old_items[i] if i < len(old_items) else old_rest
            now = new_items[i] if i < len(new_items) else new_rest
            if isinstance(was, dict) and isinstance(now, dict):
                self.types(f"{where}[{i}]", was, now)
        if isinstance(old_rest, dict) and isinstance(new_rest, dict):
            self.types(f"{where}[]", old_rest, new_rest)

    def _bounds(self, where: str, old: Any, new: Any) -> None:
        for key in (*_LOWER_BOUNDS, *_UPPER_BOUNDS, *_EXACT):
            was, now = old.get(key), new.get(key)
            if was == now:
                continue
            what = f"{key} changed from {_value(was)} to {_value(now)}"
            if was is None:
                rule = TYPE_NARROWED
            elif now is None:
                rule = TYPE_WIDENED
            elif key in _LOWER_BOUNDS:
                rule = TYPE_NARROWED if now > was else TYPE_WIDENED
            elif key in _UPPER_BOUNDS:
                rule = TYPE_NARROWED if now < was else TYPE_WIDENED
            else:
                rule = TYPE_CHANGED
            self.note(where, what, rule)

    def structs(self, old_name: str, new_name: str) -> None:
        """Compare two structs field by field (once each pair, however often it is used)."""
        if (old_name, new_name) in self._seen:
            return
        self._seen.add((old_name, new_name))
        old, new = self.old.defs[old_name], self.new.defs[new_name]
        label = self.new.label(new_name)
        if old_name != new_name:
            self.note(label, f"renamed from {old_name}", RENAMED)
        old_tag, new_tag = self.old.tags.get(old_name), self.new.tags.get(new_name)
        if old_tag and new_tag and old_tag[0] != new_tag[0]:
            what = f"tag field renamed from {old_tag[0]} to {new_tag[0]}"
            self.note(label, what, TYPE_CHANGED)
        old_fields = _fields(old, old_tag)
        new_fields = _fields(new, new_tag)
        old_required, new_required = set(old.get("required", ())), set(new.get("required", ()))
        closed = new.get("additionalProperties") is False
        for name in sorted(old_fields.keys() - new_fields.keys()):
            if name in old_required:
                self.note(f"{label}.{name}", "renamed or removed", FIELD_REMOVED_WITHOUT_DEFAULT)
            else:
                self.note(f"{label}.{name}", "renamed or removed", FIELD_REMOVED_WITH_DEFAULT)
        for name in sorted(new_fields.keys() - old_fields.keys()):
            where = f"{label}.{name}"
            if name in new_required:
                self.note(where, "added without a default", FIELD_ADDED_WITHOUT_DEFAULT)
            elif not closed:
                self.note(where, "added with a default", FIELD_ADDED_WITH_DEFAULT)
            if closed:
                self.note(
                    where, f"added, and {new_name} forbids unknown fields", FIELD_ADDED_TO_CLOSED
                )
        for name in sorted(old_fields.keys() & new_fields.keys()):
            self._field(
                f"{label}.{name}",
                name,
                old_fields[name],
                new_fields[name],
                (name in old_required, name in new_required),
            )
        was_closed = old.get("additionalProperties") is False
        if closed and not was_closed:
            self.note(label, "now forbids unknown fields", STRUCT_CLOSED)
        elif was_closed and not closed:
            self.note(label, "now accepts unknown fields", STRUCT_OPENED)

    def _field(
        self, where: str, name: str, old: Any, new: Any, required: tuple[bool, bool]
    ) -> None:
        if required == (True, False):
            self.note(where, f"given a default ({_value(new.get('default'))})", DEFAULT_GIVEN)
        elif required == (False, True):
            self.note(where, "no longer has a default", DEFAULT_TAKEN)
        elif "default" in old and "default" in new and old["default"] != new["default"]:
            moved = (old["default"], new["default"]) == self.versions
            if not (name in _VERSION_FIELDS and moved):
                was, now = _value(old["default"]), _value(new["default"])
                self.note(where, f"default changed from {was} to {now}", DEFAULT_CHANGED)
        self.types(where, old, new)


def _fields(struct: Any, tag: list[Any] | None) -> dict[str, Any]:
    """A struct's fields as the wire names them, without its tag (compared as a tag)."""
    properties: dict[str, Any] = struct.get("properties", {})
    return {name: schema for name, schema in properties.items() if not tag or name != tag[0]}


def _alternatives(node: Any, side: _Side) -> dict[str, Any]:
    """The kinds of value a schema takes, by a key that matches across versions: a primitive
    type, ``value:<json>`` for a literal, ``tag:<json>`` for a tagged struct (its name),
    ``struct`` for an untagged one, ``array``, ``dict`` or ``any``."""
    if node is True or node == {}:
        return {"any": {}}
    if not isinstance(node, dict):
        return {}
    if "$ref" in node:
        name, target = side.resolve(node["$ref"])
        if "enum" in target:
            return _alternatives({"enum": target["enum"]}, side)
        tag = side.tags.get(name)
        return {f"tag:{_sort_key(tag[1])}" if tag else "struct": name}
    found: dict[str, Any] = {}
    for member in node.get("anyOf", ()):
        found |= _alternatives(member, side)
    for value in node.get("enum", ()):
        found[f"value:{_sort_key(value)}"] = value
    if "const" in node:
        found[f"value:{_sort_key(node['const'])}"] = node["const"]
    kinds = node.get("type", ())
    for kind in [kinds] if isinstance(kinds, str) else kinds:
        if kind == "object":
            found["dict"] = node
        else:
            found[kind] = node
    if not found and not node.keys() - {"default", "title", "description"}:
        found["any"] = {}
    return found


def _covered(key: str, alternatives: Mapping[str, Any]) -> bool:
    """Whether every value of alternative ``key`` is also taken by one of ``alternatives``."""
    if "any" in alternatives:
        return True
    if key == "integer":
        return "number" in alternatives
    if not key.startswith("value:"):
        return False
    value = json.loads(key.removeprefix("value:"))
    if isinstance(value, bool):
        return "boolean" in alternatives
    if isinstance(value, int):
        return "integer" in alternatives or "number" in alternatives
    kinds = {str: "string", float: "number", type(None): "null"}
    return kinds.get(type(value)) in alternatives


def _shown(key: str, alternatives: Mapping[str, Any]) -> str:
    """One alternative as a message shows it."""
    if key.startswith("tag:"):
        return f"{key.removeprefix('tag:')} ({alternatives[key]})"
    if key.startswith("value:"):
        return _value(alternatives[key])
    if key == "struct":
        return str(alternatives[key])
    return key


def _described(alternatives: Mapping[str, Any]) -> str:
    return " | ".join(_shown(key, alternatives) for key in sorted(alternatives)) or "nothing"


def _value(value: Any) -> str:
    return json.dumps(value)


def compare(old: Document, new: Document) -> list[Change]:
    """Every change from ``old`` to ``new``, each with the rule it falls under."""
    versions = (int(old.get("version", 0)), int(new.get("version", 0)))
    comparison = _Comparison(_Side(old), _Side(new), versions)
    comparison.roots()
    if not comparison.changes and text({**old, "version": 0}) != text({**new, "version": 0}):
        comparison.note("the recorded file", "is out of date", RECORD_OUTDATED)
    return comparison.changes


# -- the verdict -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """What the check finds for one family: its lines, whether nothing is to be done, and
    whether ``record`` may write the current version's file."""

    family: Family
    version: int
    changes: tuple[Change, ...]
    lines: tuple[str, ...]
    ok: bool
    recordable: bool


def judge(
    family: Family,
    version: int,
    now: Document,
    files: Mapping[int, Document],
    upcasters: Iterable[int] = (),
) -> Verdict:
    """Compare the shapes of the code (``now``, at ``version``) with the recorded ``files``."""
    say = family.name
    if not files:
        line = f"{say}: nothing recorded yet — make schema writes {family.path(version).name}"
        return Verdict(family, version, (), (line,), ok=False, recordable=True)
    if version < max(files) and version not in files:
        line = f"{say}: {family.constant} is {version}, older than every recorded file"
        return Verdict(family, version, (), (line,), ok=False, recordable=False)
    base = version if version in files else max(n for n in files if n < version)
    changes = tuple(compare(files[base], now))
    words = {"before": family.before.format(n=base), "old": family.old.format(n=base)}
    if base == version:
        lines = tuple(_line(say, change, words, family.fix(version)) for change in changes)
        recordable = not any(change.breaks for change in changes) and version == max(files)
        return Verdict(family, version, changes, lines, not changes, recordable)
    missing = [n for n in range(base, version) if family.upcasts and n not in set(upcasters)]
    covered = f"covered by the bump to {version}"
    lines = tuple(_line(say, change, words, covered) for change in changes)
    if missing:
        lines += tuple(
            f"{say}: {family.constant} is {version} but events/upcast.py has no upcaster from "
            f"{n}: add UPCASTERS[{n}], which brings schema {n} to {n + 1}, then make schema"
            for n in missing
        )
        return Verdict(family, version, changes, lines, ok=False, recordable=False)
    lines += (
        f"{say}: {family.constant} {version} is not recorded yet — make schema writes "
        f"{family.path(version).name}",
    )
    return Verdict(family, version, changes, lines, ok=False, recordable=True)


def _line(family: str, change: Change, words: Mapping[str, str], fix: str) -> str:
    why = change.rule.why.format_map(words)
    if not change.breaks:
        return f"{family}: {change.where} {change.what}: FULL ({why}) — record it: make schema"
    broken = " and ".join(change.breaks)
    return f"{family}: {change.where} {change.what}: breaks {broken} ({why}) — {fix}"


# -- the command -------------------------------------------------------------------------------


def check(
    directory: Path = SCHEMAS, out: Callable[[str], None] = print, module: Path = SDK_MODULE
) -> int:
    """Print what differs from the recorded shapes, and whether the SDK's wire module is what
    the recorded wire file gives; 0 when nothing differs, else 1."""
    verdicts = [_verdict(family, directory) for family in (STORED, WIRE)]
    for verdict in verdicts:
        for line in verdict.lines:
            out(line)
    sdk = sdk_line(directory, module)
    if sdk is not None:
        out(sdk)
    if all(verdict.ok for verdict in verdicts) and sdk is None:
        versions = ", ".join(f"{v.family.name} {v.version}" for v in verdicts)
        out(f"schemas: the code's shapes are the recorded ones ({versions}), and the SDK's")
        return 0
    return 1


def sdk_source(directory: Path = SCHEMAS) -> str | None:
    """The SDK's wire module as the recorded file of the current protocol gives it (None: that
    file is not recorded yet)."""
    doc = recorded(WIRE, directory).get(PROTOCOL)
    return None if doc is None else sdkgen.source(doc, sdkgen.own_shapes())


def sdk_line(directory: Path = SCHEMAS, module: Path = SDK_MODULE) -> str | None:
    """What is wrong with the SDK's wire module, or None when it is what it should be."""
    expected = sdk_source(directory)
    if expected is None:
        return None  # the wire family's own line says what to do first
    name = f"{module.parent.name}/{module.name}"
    if not module.exists():
        return f"sdk: {name} is missing — make schema writes it from {WIRE.path(PROTOCOL).name}"
    if module.read_text() != expected:
        return (
            f"sdk: {name} is not what {WIRE.path(PROTOCOL).name} gives (edited by hand, or "
            "not written since the schema was recorded) — make schema writes it"
        )
    return None


def record(
    directory: Path = SCHEMAS, out: Callable[[str], None] = print, module: Path = SDK_MODULE
) -> int:
    """Write the current version's file of each family whose changes allow it, then the SDK's
    wire module from the wire file; 1 when a family's changes do not allow it (nothing of
    that family is written)."""
    status = 0
    for family in (STORED, WIRE):
        now = generated(family)
        verdict = _verdict(family, directory, now)
        path = family.path(verdict.version, directory)
        if verdict.ok:
            out(f"{family.name}: {path.name} is up to date")
        elif verdict.recordable:
            directory.mkdir(parents=True, exist_ok=True)
            path.write_text(text(now))
            out(f"{family.name}: wrote {path.name}")
        else:
            for line in verdict.lines:
                out(line)
            out(f"{family.name}: nothing written: what is above comes first")
            status = 1
    source = sdk_source(directory)
    name = f"{module.parent.name}/{module.name}"
    if source is not None and (not module.exists() or module.read_text() != source):
        module.write_text(source)
        out(f"sdk: wrote {name} from {WIRE.path(PROTOCOL).name}")
    elif source is not None:
        out(f"sdk: {name} is up to date")
    return status


def _verdict(family: Family, directory: Path, now: Document | None = None) -> Verdict:
    version = current_version(family)
    shapes = generated(family) if now is None else now
    return judge(family, version, shapes, recorded(family, directory), UPCASTERS)


def main(argv: Sequence[str] | None = None) -> int:
    """``check`` or ``record``; the exit status."""
    parser = argparse.ArgumentParser(prog="python -m services.cli.schemas", description=__doc__)
    parser.add_argument("command", choices=("check", "record"))
    args = parser.parse_args(argv)
    return check() if args.command == "check" else record()


if __name__ == "__main__":
    sys.exit(main())
