"""The schema check of `make lint` (services/cli/schemas.py): the recorded files are what the
code generates, each compatibility rule is reported with its fix, and a field of events/ renamed
without a new schema fails the lint's own command.

The rules are checked on small shapes built here (a ``TilePlayed`` before and after a change,
inside an envelope), the way msgspec builds the real ones; docs/store.md has the table.
"""

from __future__ import annotations

import functools
import operator
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
import pytest

from events.envelope import SCHEMA
from events.upcast import UPCASTERS
from services.cli import schemas, sdkgen
from services.cli.schemas import STORED, WIRE, Change, Document, Family, Rule, judge

pytestmark = pytest.mark.engine

ROOT = Path(__file__).resolve().parents[2]
End = Literal["left", "right"]


def played(*fields: Any, name: str = "TilePlayed", tag: str = "tile_played", **options: Any) -> Any:
    """A version of the TilePlayed event: ``fields`` as msgspec.defstruct takes them."""
    return msgspec.defstruct(
        name, list(fields), tag=tag, tag_field="type", kw_only=True, frozen=True, **options
    )


def shapes(*events: Any, family: Family = STORED, version: int = 1) -> Document:
    """The document of an envelope whose event is one of ``events``."""
    event = functools.reduce(operator.or_, events)
    envelope = msgspec.defstruct(
        "Envelope", [("event", event), ("schema", int, version)], kw_only=True
    )
    return schemas.document(family, version, {"Envelope": envelope})


def changes(old: Any, new: Any) -> list[Change]:
    return schemas.compare(shapes(old), shapes(new))


def lines(old: Any, new: Any, family: Family = STORED) -> tuple[str, ...]:
    before, after = shapes(old, family=family), shapes(new, family=family)
    return judge(family, 1, after, {1: before}, UPCASTERS).lines


BEFORE = played(("seat", int), ("end", End | None), ("points", int, 0))
BUMP = "bump SCHEMA in events/envelope.py to 2 and add an upcaster from 1 (events/upcast.py)"

# (what changed, the struct after it, the rule, the words of the change, the modes it breaks)
CASES: list[tuple[str, Any, Rule, str, str]] = [
    (
        "a field added with a default",
        played(("seat", int), ("end", End | None), ("points", int, 0), ("note", str, "")),
        schemas.FIELD_ADDED_WITH_DEFAULT,
        "TilePlayed (tile_played).note added with a default",
        "FULL",
    ),
    (
        "a field added without a default",
        played(("seat", int), ("end", End | None), ("points", int, 0), ("note", str)),
        schemas.FIELD_ADDED_WITHOUT_DEFAULT,
        "TilePlayed (tile_played).note added without a default",
        "breaks BACKWARD (logs written before lack it)",
    ),
    (
        "a field with a default removed",
        played(("seat", int), ("end", End | None)),
        schemas.FIELD_REMOVED_WITH_DEFAULT,
        "TilePlayed (tile_played).points renamed or removed",
        "breaks BACKWARD (logs written before hold it",
    ),
    (
        "a field without a default removed",
        played(("seat", int), ("points", int, 0)),
        schemas.FIELD_REMOVED_WITHOUT_DEFAULT,
        "TilePlayed (tile_played).end renamed or removed",
        "breaks BACKWARD and FORWARD (logs written before hold it, and readers of schema 1 "
        "require it)",
    ),
    (
        "a field's type changed",
        played(("seat", str), ("end", End | None), ("points", int, 0)),
        schemas.TYPE_CHANGED,
        "TilePlayed (tile_played).seat type changed from integer to string",
        "breaks BACKWARD and FORWARD",
    ),
    (
        "a type narrowed",
        played(("seat", int), ("end", End), ("points", int, 0)),
        schemas.TYPE_NARROWED,
        "TilePlayed (tile_played).end no longer takes null",
        "breaks BACKWARD (logs written before may hold what it no longer takes)",
    ),
    (
        "a bound tightened",
        played(
            ("seat", Annotated[int, msgspec.Meta(ge=0)]), ("end", End | None), ("points", int, 0)
        ),
        schemas.TYPE_NARROWED,
        "TilePlayed (tile_played).seat minimum changed from null to 0",
        "breaks BACKWARD",
    ),
    (
        "a type widened",
        played(("seat", int | None), ("end", End | None), ("points", int, 0)),
        schemas.TYPE_WIDENED,
        "TilePlayed (tile_played).seat now also takes null",
        "breaks FORWARD (readers of schema 1 fail on what it now also takes)",
    ),
    (
        "a literal value added",
        played(("seat", int), ("end", Literal["left", "right", "up"] | None), ("points", int, 0)),
        schemas.LITERAL_ADDED,
        'TilePlayed (tile_played).end value "up" added',
        "breaks FORWARD (readers of schema 1 fail on a value they do not know)",
    ),
    (
        "a literal value removed",
        played(("seat", int), ("end", Literal["left"] | None), ("points", int, 0)),
        schemas.LITERAL_REMOVED,
        'TilePlayed (tile_played).end value "right" removed',
        "breaks BACKWARD (logs written before may hold it)",
    ),
    (
        "a default changed",
        played(("seat", int), ("end", End | None), ("points", int, 1)),
        schemas.DEFAULT_CHANGED,
        "TilePlayed (tile_played).points default changed from 0 to 1",
        "breaks BACKWARD and FORWARD (it changes what logs written before mean",
    ),
    (
        "a required field given a default",
        played(("seat", int), ("end", End | None, None), ("points", int, 0)),
        schemas.DEFAULT_GIVEN,
        "TilePlayed (tile_played).end given a default (null)",
        "breaks FORWARD",
    ),
    (
        "a default removed",
        played(("seat", int), ("end", End | None), ("points", int)),
        schemas.DEFAULT_TAKEN,
        "TilePlayed (tile_played).points no longer has a default",
        "breaks BACKWARD (logs written before may lack it)",
    ),
    (
        "a struct made to forbid unknown fields",
        played(("seat", int), ("end", End | None), ("points", int, 0), forbid_unknown_fields=True),
        schemas.STRUCT_CLOSED,
        "TilePlayed (tile_played) now forbids unknown fields",
        "breaks BACKWARD",
    ),
    (
        "a class renamed, its tag kept",
        played(("seat", int), ("end", End | None), ("points", int, 0), name="TilePlaced"),
        schemas.RENAMED,
        "TilePlaced (tile_played) renamed from TilePlayed",
        "FULL",
    ),
]


@pytest.mark.parametrize(
    ("after", "rule", "what", "broken"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_each_change_to_an_event_is_reported_under_its_rule_with_its_fix(
    after: Any, rule: Rule, what: str, broken: str
) -> None:
    assert rule in [change.rule for change in changes(BEFORE, after)]
    [line] = [line for line in lines(BEFORE, after) if what in line]
    assert line.startswith(f"stored: {what}: ")
    assert broken in line
    if rule.breaks:
        assert line.endswith(f"— {BUMP}, then make schema")
    else:
        assert line.endswith("— record it: make schema")


def test_a_renamed_field_is_a_field_removed_and_one_added_and_breaks_backward() -> None:
    after = played(("seat", int), ("side", End | None), ("points", int, 0))
    found = {(change.where, change.rule) for change in changes(BEFORE, after)}
    assert found == {
        ("TilePlayed (tile_played).end", schemas.FIELD_REMOVED_WITHOUT_DEFAULT),
        ("TilePlayed (tile_played).side", schemas.FIELD_ADDED_WITHOUT_DEFAULT),
    }


def test_a_new_event_type_is_a_new_tag_and_breaks_forward() -> None:
    passed = played(("seat", int), name="TurnPassed", tag="turn_passed")
    old, new = shapes(BEFORE), shapes(BEFORE, passed)
    [change] = schemas.compare(old, new)
    assert (change.where, change.rule) == ("Envelope.event", schemas.TAG_ADDED)
    [line] = judge(STORED, 1, new, {1: old}, UPCASTERS).lines
    assert 'Envelope.event tag "turn_passed" (TurnPassed) added: breaks FORWARD' in line
    assert "consumers deploy before producers" in line
    assert line.endswith(f"— {BUMP}, then make schema")


def test_an_event_type_removed_is_a_tag_removed_and_breaks_backward() -> None:
    passed = played(("seat", int), name="TurnPassed", tag="turn_passed")
    [change] = schemas.compare(shapes(BEFORE, passed), shapes(BEFORE))
    assert change.rule is schemas.TAG_REMOVED
    assert change.what == 'tag "turn_passed" (TurnPassed) removed'


def test_a_field_added_to_a_struct_that_forbids_unknown_fields_breaks_forward() -> None:
    closed = played(("seat", int), forbid_unknown_fields=True)
    grown = played(("seat", int), ("note", str, ""), forbid_unknown_fields=True)
    assert [change.rule for change in changes(closed, grown)] == [schemas.FIELD_ADDED_TO_CLOSED]


def test_a_docstring_or_the_order_of_fields_or_of_a_union_is_no_change() -> None:
    passed = played(("seat", int), name="TurnPassed", tag="turn_passed")
    reordered = played(("points", int, 0), ("end", None | End), ("seat", int))
    reordered.__doc__ = "Written again."
    old, new = shapes(BEFORE, passed), shapes(passed, reordered)
    assert schemas.compare(old, new) == []
    assert schemas.text(old) == schemas.text(new)
    assert judge(STORED, 1, new, {1: old}, UPCASTERS).ok


def test_a_full_change_asks_to_be_recorded_and_record_may_write_it() -> None:
    grown = played(("seat", int), ("end", End | None), ("points", int, 0), ("note", str, ""))
    verdict = judge(STORED, 1, shapes(grown), {1: shapes(BEFORE)}, UPCASTERS)
    assert not verdict.ok
    assert verdict.recordable
    assert all("bump" not in line for line in verdict.lines)


def test_a_breaking_change_within_a_version_may_not_be_recorded() -> None:
    renamed = played(("seat", int), ("side", End | None), ("points", int, 0))
    verdict = judge(STORED, 1, shapes(renamed), {1: shapes(BEFORE)}, UPCASTERS)
    assert not verdict.ok
    assert not verdict.recordable


def test_a_wire_change_names_the_protocol_version_and_no_upcaster() -> None:
    after = played(("seat", int), ("side", End | None), ("points", int, 0))
    for line in lines(BEFORE, after, family=WIRE):
        assert line.startswith("wire: TilePlayed (tile_played).")
        assert "(messages of protocol 1" in line
        assert line.endswith(
            "— bump PROTOCOL in services/sdk/domino_sdk/protocol.py to 2, then make schema"
        )


def test_a_bump_with_an_upcaster_passes_the_check_and_asks_only_to_be_recorded() -> None:
    renamed = played(("seat", int), ("side", End | None), ("points", int, 0))
    new = shapes(renamed, version=2)
    verdict = judge(STORED, 2, new, {1: shapes(BEFORE)}, upcasters=[0, 1])
    assert verdict.recordable
    assert [change.rule for change in verdict.changes] == [
        schemas.FIELD_REMOVED_WITHOUT_DEFAULT,
        schemas.FIELD_ADDED_WITHOUT_DEFAULT,
    ]  # the envelope's schema field defaulting to the new version is no change
    assert all("covered by the bump to 2" in line for line in verdict.lines[:-1])
    assert verdict.lines[-1] == (
        "stored: SCHEMA 2 is not recorded yet — make schema writes stored-2.json"
    )
    recorded = judge(STORED, 2, new, {1: shapes(BEFORE), 2: new}, upcasters=[0, 1])
    assert recorded.ok


def test_a_bump_without_an_upcaster_fails_and_may_not_be_recorded() -> None:
    renamed = played(("seat", int), ("side", End | None), ("points", int, 0))
    verdict = judge(STORED, 2, shapes(renamed, version=2), {1: shapes(BEFORE)}, upcasters=[0])
    assert not verdict.recordable
    assert verdict.lines[-1] == (
        "stored: SCHEMA is 2 but events/upcast.py has no upcaster from 1: add UPCASTERS[1], "
        "which brings schema 1 to 2, then make schema"
    )


def test_the_recorded_files_are_what_the_code_generates() -> None:
    for family in (STORED, WIRE):
        version = schemas.current_version(family)
        path = family.path(version)
        assert path.read_text() == schemas.text(schemas.generated(family)), (
            f"{path.name} is not what the code generates: run make schema"
        )
        verdict = judge(family, version, schemas.generated(family), schemas.recorded(family))
        assert verdict.ok, verdict.lines


def test_every_schema_has_an_upcaster_to_the_next_up_to_the_current_one() -> None:
    assert set(range(min(UPCASTERS), SCHEMA)) <= set(UPCASTERS)


# -- the lint's own command on a copy of the project -------------------------------------------


def lint_command() -> list[str]:
    """The schema check as `make lint` runs it, with this interpreter for $(BIN)/python."""
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("\nlint:", 1)[1].split("\n\n", 1)[0]
    [line] = [line for line in recipe.splitlines() if "services.cli.schemas" in line]
    return [sys.executable, *line.strip().removeprefix("$(BIN)/python").split()]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the project's Python packages; run from it, they are the ones imported (the
    SDK, a distribution of its own, is the installed one: its source is copied for the wire
    module the check reads and ``record`` writes)."""
    skip = shutil.ignore_patterns("__pycache__", "sdk", "web", "*.pyc")
    for package in ("engine", "events", "services"):
        shutil.copytree(ROOT / package, tmp_path / package, ignore=skip)
    sdk = shutil.ignore_patterns("__pycache__", "*.pyc", "build", "*.egg-info")
    shutil.copytree(ROOT / "services/sdk", tmp_path / "services/sdk", ignore=sdk)
    return tmp_path


def edit(path: Path, old: str, new: str) -> None:
    source = path.read_text()
    assert source.count(old) == 1, f"{old!r} is not in {path} once"
    path.write_text(source.replace(old, new))


def run(project: Path, command: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, cwd=project, capture_output=True, text=True, timeout=120, check=False
    )


def test_renaming_a_field_of_an_event_without_a_bump_fails_the_lint(project: Path) -> None:
    edit(
        project / "events/model.py",
        "    end: End | None\n    points",
        "    side: End | None\n    points",
    )
    done = run(project, lint_command())
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        "stored: TilePlayed (tile_played).end renamed or removed: breaks BACKWARD and FORWARD "
        "(logs written before hold it, and readers of schema 1 require it) — bump SCHEMA in "
        "events/envelope.py to 2 and add an upcaster from 1 (events/upcast.py), then make schema"
    ) in done.stdout
    assert "stored: TilePlayed (tile_played).side added without a default: breaks BACKWARD" in (
        done.stdout
    )
    refused = run(project, [sys.executable, "-m", "services.cli.schemas", "record"])
    assert refused.returncode == 1
    assert "stored: nothing written" in refused.stdout


def test_a_bump_with_an_upcaster_is_recorded_in_a_new_file_and_the_old_one_kept(
    project: Path,
) -> None:
    # a field only the command stream holds: the bot protocol carries events, not DealRound
    edit(project / "events/model.py", "    first_leader: int", "    leader: int")
    edit(project / "events/envelope.py", f"SCHEMA = {SCHEMA}\n", f"SCHEMA = {SCHEMA + 1}\n")
    old = (project / f"events/schemas/stored-{SCHEMA}.json").read_text()
    assert run(project, lint_command()).returncode == 1  # no upcaster from SCHEMA yet
    edit(
        project / "events/upcast.py",
        '"""The upcasters by the schema they read',
        f'UPCASTERS[{SCHEMA}] = Upcaster(reads={SCHEMA}, why="end renamed side")\n'
        '"""The upcasters by the schema they read',
    )
    unrecorded = run(project, lint_command())
    assert unrecorded.returncode == 1
    assert "covered by the bump" in unrecorded.stdout
    assert "make schema writes" in unrecorded.stdout
    recorded = run(project, [sys.executable, "-m", "services.cli.schemas", "record"])
    assert recorded.returncode == 0, recorded.stdout
    assert f"stored: wrote stored-{SCHEMA + 1}.json" in recorded.stdout
    assert (project / f"events/schemas/stored-{SCHEMA}.json").read_text() == old
    checked = run(project, lint_command())
    assert checked.returncode == 0, checked.stdout
    assert re.search(rf"stored {SCHEMA + 1}\b", checked.stdout)


# -- the SDK's wire module, written from the recorded wire file --------------------------------


def test_the_sdks_wire_module_is_what_the_recorded_wire_file_gives() -> None:
    assert schemas.SDK_MODULE.read_text() == schemas.sdk_source()
    assert schemas.sdk_line() is None


def test_a_field_added_to_a_server_struct_fails_the_lint_until_make_schema_writes_it_to_the_sdk(
    project: Path,
) -> None:
    """The server's struct changes; the SDK's module follows only through the recorded file."""
    edit(
        project / "events/view.py", "    tiles: int = 0\n", "    tiles: int = 0\n    arm: int = 0\n"
    )
    module = project / "services/sdk/domino_sdk/wire.py"
    before = module.read_text()
    drifted = run(project, lint_command())
    assert drifted.returncode == 1, drifted.stdout
    assert "wire: OpenEnd.arm added with a default: FULL" in drifted.stdout
    recorded = run(project, [sys.executable, "-m", "services.cli.schemas", "record"])
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert "sdk: wrote domino_sdk/wire.py from wire-1.json" in recorded.stdout
    after = module.read_text()
    assert after != before
    open_end = after.split("class OpenEnd(", 1)[1].split("\n\n", 1)[0]
    assert "    arm: int = 0\n" in open_end
    checked = run(project, lint_command())
    assert checked.returncode == 0, checked.stdout


def test_the_sdks_wire_module_edited_by_hand_or_left_behind_fails_the_lint(project: Path) -> None:
    module = project / "services/sdk/domino_sdk/wire.py"
    edit(module, "    tiles: int = 0\n", "    tiles: int = 1\n")
    edited = run(project, lint_command())
    assert edited.returncode == 1
    assert "sdk: domino_sdk/wire.py is not what wire-1.json gives" in edited.stdout
    rewritten = run(project, [sys.executable, "-m", "services.cli.schemas", "record"])
    assert "sdk: wrote domino_sdk/wire.py" in rewritten.stdout
    assert run(project, lint_command()).returncode == 0
    # the server's struct changed and its schema recorded, but the SDK's module not written
    edit(
        project / "events/view.py", "    tiles: int = 0\n", "    tiles: int = 0\n    arm: int = 0\n"
    )
    only_the_schema = (
        "from services.cli import schemas as s; "
        "s.WIRE.path(s.PROTOCOL).write_text(s.text(s.generated(s.WIRE)))"
    )
    assert run(project, [sys.executable, "-c", only_the_schema]).returncode == 0
    behind = run(project, lint_command())
    assert behind.returncode == 1
    said = behind.stdout.splitlines()
    assert not [line for line in said if line.startswith("wire:")], behind.stdout
    assert "sdk: domino_sdk/wire.py is not what wire-1.json gives" in behind.stdout


def test_the_sdk_reads_a_struct_as_the_server_writes_it_but_never_refuses_a_field_added_later(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Fields, types, defaults and tags as recorded; a struct that forbids unknown fields on the
    server is read by the SDK without the refusal; a keyword is read under its other name."""
    closed = msgspec.defstruct(
        "Closed",
        [("seat", int), ("end", End | None, None), ("tiles", tuple[tuple[int, int], ...], ())],
        tag="closed",
        tag_field="type",
        kw_only=True,
        forbid_unknown_fields=True,
    )
    named = msgspec.defstruct(
        "Named", [("challenger", str, msgspec.field(name="from"))], kw_only=True
    )
    doc = schemas.document(WIRE, 1, {"Closed": closed, "Named": named})
    module = types.ModuleType("generated_wire")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(sdkgen.source(doc, set()), module.__dict__)
    namespace = vars(module)
    read = msgspec.json.decode(
        b'{"type":"closed","seat":1,"tiles":[[1,2]],"later":true}', type=namespace["Closed"]
    )
    assert msgspec.to_builtins(read) == {
        "type": "closed",
        "seat": 1,
        "end": None,
        "tiles": ((1, 2),),
    }
    assert msgspec.json.decode(b'{"from":"ana"}', type=namespace["Named"]).challenger == "ana"
    assert msgspec.json.schema(namespace["Named"]) == msgspec.json.schema(named)


def test_a_wire_name_that_is_a_keyword_and_unnamed_for_the_sdk_stops_the_generator() -> None:
    odd = msgspec.defstruct("Odd", [("lambda_", int, msgspec.field(name="lambda"))])
    with pytest.raises(sdkgen.UnsupportedSchema, match=r"Odd\.lambda: add it to sdkgen\.NAMES"):
        sdkgen.source(schemas.document(WIRE, 1, {"Odd": odd}), set())
