"""Help layouts by hand: a command's options under section headings
(prefixsim/cli/help_sections.py) and a group's listing of subcommands it has not imported
(prefixsim/cli/lazy_group.py), on commands built in the test."""

from __future__ import annotations

import sys

import click
from click.testing import CliRunner

from prefixsim.cli.help_sections import SectionedCommand
from prefixsim.cli.lazy_group import LazyCommand, LazyGroup


def sectioned(sections):
    @click.command(cls=SectionedCommand, sections=sections,
                   context_settings={"help_option_names": ["-h", "--help"]})
    @click.option("--alpha", help="First option.")
    @click.option("--beta", help="Second option.")
    @click.option("--gamma", help="Third option.")
    @click.argument("thing", required=False)
    def command(alpha, beta, gamma, thing):
        """Does a thing."""

    return command


def help_text(command, *args):
    return CliRunner().invoke(command, [*args, "--help"]).output


def test_options_under_their_sections_in_order_and_the_rest_under_other_options():
    text = help_text(sectioned([("Chosen", ["gamma", "help", "alpha"]), ("Empty", ["nope"])]))
    assert text == (
        "Usage: command [OPTIONS] [THING]\n\n  Does a thing.\n\n"
        "Chosen:\n"
        "  --gamma TEXT  Third option.\n"
        "  -h, --help    Show this message and exit.\n"
        "  --alpha TEXT  First option.\n\n"
        "Other options:\n"
        "  --beta TEXT  Second option.\n")


def test_without_sections_every_option_is_an_other_option():
    text = help_text(sectioned([]))
    assert "Other options:\n  --alpha TEXT" in text and "-h, --help" in text
    assert "THING" not in text.split("Other options:")[1]  # arguments are in the usage line


def test_every_option_placed_leaves_no_other_options():
    text = help_text(sectioned([("All", ["alpha", "beta", "gamma", "help"])]))
    assert "Other options" not in text and text.count("--") == 4


# ------------------------------------------------------------------------- lazy group
def lazy_group(tmp_path, monkeypatch):
    """A group with one command defined here and one in a module not yet imported."""
    group = LazyGroup(name="tool", lazy=[
        LazyCommand("later", "lazy_later_cmd", "Runs later, imported when first used and "
                    "described at some length so that it is cut."),
        LazyCommand("soon", "lazy_soon_cmd", "Never imported by the listing.")])
    module = tmp_path / "lazy_later_cmd.py"
    module.write_text(
        "import click\nimport test_help_layout_by_hand as t\n\n"
        "@t.GROUP.command('later', short_help='Runs later.')\n"
        "def later():\n    click.echo('ran later')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys.modules[__name__], "GROUP", group, raising=False)

    @group.command("here", short_help="Already here.")
    def here():
        """Already here."""

    @group.command("hidden", hidden=True)
    def hidden():
        """Not listed."""

    return group


def test_the_listing_imports_nothing_and_cuts_as_click_does(tmp_path, monkeypatch):
    group = lazy_group(tmp_path, monkeypatch)
    for name in ("lazy_later_cmd", "lazy_soon_cmd"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    text = CliRunner().invoke(group, ["--help"], terminal_width=60).output
    assert "lazy_later_cmd" not in sys.modules and "lazy_soon_cmd" not in sys.modules
    commands = text.split("Commands:\n")[1]
    assert commands == (
        "  here   Already here.\n"
        "  later  Runs later, imported when first used and...\n"
        "  soon   Never imported by the listing.\n")
    assert group.list_commands(None) == ["here", "hidden", "later", "soon"]


def test_a_lazy_command_is_imported_when_used(tmp_path, monkeypatch):
    group = lazy_group(tmp_path, monkeypatch)
    monkeypatch.delitem(sys.modules, "lazy_later_cmd", raising=False)
    assert CliRunner().invoke(group, ["later"]).output == "ran later\n"
    assert "lazy_later_cmd" in sys.modules
    assert group.get_command(None, "nosuch") is None
    assert group.commands["later"].short_help == "Runs later."
    text = CliRunner().invoke(group, ["--help"], terminal_width=60).output
    assert "  later  Runs later.\n" in text  # listed by the command itself once imported


def test_load_all_imports_every_lazy_command(tmp_path, monkeypatch):
    group = lazy_group(tmp_path, monkeypatch)
    (tmp_path / "lazy_soon_cmd.py").write_text(
        "import test_help_layout_by_hand as t\n\n"
        "@t.GROUP.command('soon')\ndef soon():\n    pass\n")
    for name in ("lazy_later_cmd", "lazy_soon_cmd"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert sorted(group.load_all()) == ["here", "hidden", "later", "soon"]


def test_an_empty_group_lists_no_commands_section():
    result = CliRunner().invoke(LazyGroup(name="tool"), ["--help"])
    assert result.exit_code == 0 and "Commands" not in result.output


HELPS = {"a": "Short.", "bb": "A longer help that runs on " * 4,
         "ccc": "Exactly " + "x" * 40, "dddd": "Words " * 12}


def test_the_listing_is_clicks_own_imported_or_not():
    """At several widths a lazy group lists its commands as click.Group lists the same
    commands, whether they are imported yet (LazyCommand) or not."""
    for width in (50, 61, 62, 63, 80, 120):
        plain, imported = click.Group(name="tool"), LazyGroup(name="tool")
        lazy = LazyGroup(name="tool", lazy=[LazyCommand(n, f"never_{n}", t)
                                            for n, t in HELPS.items()])
        for name, text in HELPS.items():
            plain.command(name, help=text)(lambda: None)
            imported.command(name, help=text)(lambda: None)
        shown = [CliRunner().invoke(g, ["--help"], terminal_width=width).output
                 for g in (plain, imported, lazy)]
        assert shown[0] == shown[1] == shown[2], width


def test_groups_and_commands_keep_clicks_arguments():
    group = LazyGroup("tool", help="Does tools.", lazy=[])
    assert (group.name, group.help) == ("tool", "Does tools.")
    command = SectionedCommand("cmd", help="Does one.", sections=[("S", ["x"])])
    assert (command.name, command.help, command.sections) == ("cmd", "Does one.",
                                                              [("S", ["x"])])
