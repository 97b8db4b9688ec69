"""docs/configuration.md is the settings reference: generated from the same declarations as
`rating-worker run --help`, stale pages fail, and every flag the worker accepts is on it."""

from dataclasses import fields
from pathlib import Path

import pytest

from worker.cli import main
from worker.commands.settings_page import render
from worker.config import Config, settings

PAGE = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_committed_page_is_up_to_date():
    assert PAGE.read_text(encoding="utf-8") == render(), "docs/configuration.md is stale: run `rating-worker docs`"


def test_every_flag_of_run_is_on_the_page_with_its_variable_and_default(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    page, helptext = render(), capsys.readouterr().out
    assert len(settings()) == len(fields(Config))
    for s in settings():
        assert s.flag in helptext and s.env in helptext, s.name
        row = next(line for line in page.splitlines() if line.startswith(f"| `{s.env}` |"))
        assert f"`{s.flag}`" in row, row
        assert (s.default is None and "(none)" in row) or f"`{s.default}`" in row, row
        assert s.meaning.replace("|", "\\|") in row, row


def test_a_setting_the_page_does_not_know_fails(monkeypatch):
    """The staleness check can fail: a changed meaning changes the page."""
    from worker import config

    monkeypatch.setitem(config.HELP, "batch_size", "a meaning the committed page does not have")
    assert PAGE.read_text(encoding="utf-8") != render()


def test_every_flag_of_serve_is_on_the_page(capsys):
    """The read API's settings (ServeConfig) have their own section, from the same declarations as
    `rating-worker serve --help`."""
    from worker.config import ServeConfig

    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    page, helptext = render(), capsys.readouterr().out
    section = page[page.index("`rating-worker serve`"):]
    for s in settings(ServeConfig):
        assert s.flag in helptext and s.env in helptext, s.name
        assert f"| `{s.env}` | `{s.flag}` |" in section, s.name
