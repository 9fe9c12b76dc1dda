"""Every setting is documented once, on its field: README's tables are the ones ``domino
settings`` prints from the fields, and every variable README names is one the services read,
with the default they use."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import msgspec
import pytest

from services.cli.settings import SECTIONS, configuration_markdown
from services.config import ConfigError, Settings, Var, default_text, variables
from services.gateway.config import GatewaySettings

pytestmark = pytest.mark.service

README = Path(__file__).resolve().parents[2] / "README.md"
ROW = re.compile(r"\| `([A-Z][A-Z0-9_]*)` \| (.*?) \| .* \|")


def configuration_section() -> str:
    text = README.read_text()
    start = text.index("## Configuration")
    return text[start : text.index("\n## ", start)]


def documented() -> list[tuple[str, str]]:
    """(variable, default) of every table row in README's Configuration section."""
    return [(m[1], m[2]) for m in map(ROW.fullmatch, configuration_section().splitlines()) if m]


def declared() -> dict[str, str]:
    """Each variable the settings read, and its default as the tables show it."""
    out: dict[str, str] = {}
    for _, cls in SECTIONS:
        defaults = cls()  # every setting has a default
        for field, var in variables(cls).items():
            out[var.name] = default_text(getattr(defaults, field), var)
    return out


def test_the_readme_shows_the_tables_domino_settings_prints() -> None:
    assert configuration_markdown() in configuration_section(), (
        "README.md's Configuration tables differ from the settings: "
        "replace them with the output of `domino settings`"
    )


def test_every_readme_variable_is_read_with_the_default_shown_and_none_is_missing() -> None:
    rows = documented()
    names = [name for name, _ in rows]
    assert len(names) == len(set(names)), (
        f"listed twice: {sorted({n for n in names if names.count(n) > 1})}"
    )
    assert dict(rows) == declared()


def test_both_settings_classes_have_a_table() -> None:
    assert {cls for _, cls in SECTIONS} == {Settings, GatewaySettings}


def test_no_two_settings_read_the_same_variable() -> None:
    names = [var.name for _, cls in SECTIONS for var in variables(cls).values()]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("cls", [Settings, GatewaySettings])
def test_each_default_as_the_tables_show_it_reads_back_as_the_default(
    cls: type[Settings] | type[GatewaySettings],
) -> None:
    defaults = cls()
    environ = {}
    for field, var in variables(cls).items():
        value = getattr(defaults, field)
        if value is not None:  # unset is the only way to ask for a None default
            environ[var.name] = default_text(value, var).strip("`")
    assert cls.from_env(environ) == defaults
    assert cls.from_env({}) == defaults


def test_a_setting_that_names_no_variable_is_refused() -> None:
    class Bare(msgspec.Struct, frozen=True):
        size: int = 1

    with pytest.raises(TypeError, match=r"Bare\.size declares 0 Var"):
        variables(Bare)


def test_a_setting_whose_default_is_none_must_say_what_unset_means() -> None:
    class Vague(msgspec.Struct, frozen=True):
        path: Annotated[str | None, Var("VAGUE_PATH", "a path")] = None

    with pytest.raises(TypeError, match=r"Vague\.path defaults to None"):
        variables(Vague)


@pytest.mark.parametrize(
    "variable, value",
    [("DOMINO_SEARCH_SAMPLES", "-1"), ("DOMINO_SEARCH_BUDGET_MS", "0")],
)
def test_a_search_bot_that_could_not_think_is_refused_at_start(variable: str, value: str) -> None:
    with pytest.raises(ConfigError, match=variable):
        Settings.from_env({variable: value})
    assert Settings.from_env({"DOMINO_SEARCH_SAMPLES": "50"}).search_samples == 50
