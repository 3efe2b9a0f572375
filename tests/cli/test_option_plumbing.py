"""Options handed over as one object and --help in sections, on small commands built here
(prefixsim/cli/option_groups.py, prefixsim/cli/help_sections.py)."""

from dataclasses import dataclass

import click
from click.testing import CliRunner

from prefixsim.cli.help_sections import SectionedCommand
from prefixsim.cli.option_groups import executor_options, grouped
from prefixsim.sweep import ExecutorOptions


@dataclass(frozen=True)
class Pair:
    left: int = 0
    right: str = "r"


def test_grouped_options_reach_the_command_as_one_object():
    seen = {}

    @click.command()
    @click.option("--other", default="o")
    @grouped("pair", Pair, click.option("--left", type=int, default=1),
             click.option("--right", default="x"))
    def command(other, pair):
        seen.update(other=other, pair=pair)

    result = CliRunner().invoke(command, ["--right", "y", "--other", "z"])
    assert result.exit_code == 0, result.output
    assert seen == {"other": "z", "pair": Pair(left=1, right="y")}
    help_text = CliRunner().invoke(command, ["--help"]).output
    assert help_text.index("--left") < help_text.index("--right")


def test_executor_options_build_executor_options():
    seen = {}

    @click.command()
    @executor_options("Workers to run.")
    def command(workers):
        seen["workers"] = workers

    result = CliRunner().invoke(command, ["-j", "3", "--address", "tcp://h:1"])
    assert result.exit_code == 0, result.output
    assert seen["workers"] == ExecutorOptions(executor="local", n_jobs=3,
                                              address="tcp://h:1", dask_dashboard=None)
    CliRunner().invoke(command, [])
    assert seen["workers"] == ExecutorOptions()
    refused = CliRunner().invoke(command, ["-j", "0"])
    assert refused.exit_code == 2 and "0 is not in the range x>=1" in refused.output
    help_text = CliRunner().invoke(command, ["--help"]).output
    assert "Workers to run." in help_text and "HOST:PORT" in help_text
    assert "[default: local]" in help_text


def sectioned(sections):
    @click.command(cls=SectionedCommand, sections=sections)
    @click.argument("path")
    @click.option("--alpha", help="First.")
    @click.option("--beta", help="Second.")
    @click.option("--gamma", help="Third.")
    @click.option("--hidden-one", hidden=True)
    def command(path, alpha, beta, gamma, hidden_one):
        """Does nothing."""

    return command


def headings(text):
    return [line.rstrip(":") for line in text.splitlines() if line and not line[0].isspace()
            and line.endswith(":")]


def test_help_lists_options_under_their_sections_and_the_rest_last():
    command = sectioned([("Second first", ["beta", "help"]), ("Empty", ["absent"]),
                         ("Alpha", ["alpha"])])
    text = CliRunner().invoke(command, ["--help"]).output
    assert headings(text) == ["Second first", "Alpha", "Other options"]
    second, alpha, other = (text.index(h + ":") for h in headings(text))
    assert second < text.index("--beta") < text.index("--help") < alpha
    assert alpha < text.index("--alpha") < other < text.index("--gamma")
    assert "--hidden-one" not in text and "PATH" in text.splitlines()[0]
    assert "Does nothing." in text


def test_with_every_option_placed_there_is_no_other_section():
    command = sectioned([("All", ["alpha", "beta", "gamma", "help"])])
    text = CliRunner().invoke(command, ["--help"]).output
    assert headings(text) == ["All"]
    plain = sectioned([])
    assert headings(CliRunner().invoke(plain, ["--help"]).output) == ["Other options"]
