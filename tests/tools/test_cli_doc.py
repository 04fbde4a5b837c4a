"""docs/cli.md is the `campaign` argument parser, rendered: every command and every option its
`--help` prints is on the page, and the page is up to date."""

from __future__ import annotations

import re

from campaign import cli_doc
from campaign.cli import build_parser


def test_page_is_up_to_date():
    assert cli_doc.main(["--check"]) == 0, "run `python -m campaign.cli_doc`"


def test_every_command_and_option_is_on_the_page():
    page = cli_doc.render()
    listed = page.split("\n## campaign\n", 1)[1].split("\n## ", 1)[0]
    missing = [
        f"campaign {name} {option}"
        for name, sub in cli_doc.subcommands(build_parser()).items()
        for action in sub._actions
        for option in action.option_strings
        if not re.search(rf"^    {name}(\s|$)", listed, flags=re.M) or option not in page
    ]
    assert missing == []
    assert "## campaign init" in page and "--task" in page


def test_a_stale_page_fails_the_check(tmp_path, monkeypatch, capsys):
    stale = tmp_path / "docs" / "cli.md"
    stale.parent.mkdir()
    stale.write_text(cli_doc.render().replace("--dry-run", "--dryrun"))
    monkeypatch.setattr(cli_doc, "DOC_PATH", stale)
    monkeypatch.setattr(cli_doc, "ROOT", tmp_path)
    monkeypatch.setattr("campaign.tools.docgen.ROOT", tmp_path)
    assert cli_doc.main(["--check"]) == 1
    assert "docs/cli.md is out of date" in capsys.readouterr().err
