"""The table of rejection reasons in docs/protocol.md, made from the one place that says what
each means (``events.model.REASONS``): ``python -m services.cli.reasons`` prints it."""

from __future__ import annotations

from events.model import REASONS

START = "<!-- reasons: made by python -m services.cli.reasons -->"
END = "<!-- reasons end -->"


def reasons_markdown() -> str:
    """The table, between its markers."""
    rows = [
        f"| `{reason}` | {', '.join(rules) if rules else '–'} | {meaning} |"
        for reason, (rules, meaning) in REASONS.items()
    ]
    return "\n".join(
        [START, "| reason | rules | what was refused |", "| --- | --- | --- |", *rows, END]
    )


if __name__ == "__main__":
    print(reasons_markdown())
