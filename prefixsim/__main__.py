"""The entry point of the `prefixsim` command (and of `python -m prefixsim`).

`main` first opts in to the compiled hot modules (accel/: `opt_in`, a no-op where none are
built, and for the sweep workers the command starts), then loads the command line, so that
a compiled copy is imported wherever one exists for the current source
(docs/architecture.md "Compiled hot modules"); where the install could not compile them
and none has been built since, it says so in one line on stderr when that is a terminal
(unless PREFIXSIM_PURE=1 asks for the sources). Ctrl-C while the command line loads (its
imports take a few seconds) exits with 130 and one line, not a traceback
(docs/input-rules.md I18). SIGTERM ends the command the way Ctrl-C does, so staging
folders are removed on the way out (docs/input-rules.md I11): it is raised as `Terminated`
in the main process, which exits with 143 and one line; a worker process forked from it
keeps the default action. Ctrl-C while a command runs is one line and 130 as well
(cli/app.py `CommandLine`); once the command has ended, a Ctrl-C while the interpreter
exits is ignored, since Python restores the default action as it shuts down and the signal
would kill the process silently, its results written and reported.
"""

import importlib
import os
import signal
import sys
from types import FrameType

from prefixsim import accel

INTERRUPTED_EXIT = 130  # 128 + SIGINT, as a shell reports a command ended by Ctrl-C
TERMINATED_EXIT = 143  # 128 + SIGTERM


class Terminated(SystemExit):
    """SIGTERM, raised in the main process: a SystemExit, so `finally` blocks and
    `except BaseException` clean-ups run while Click and `except Exception` let it pass."""

    def __init__(self, code: int = TERMINATED_EXIT) -> None:
        # the code as an argument: simpy re-raises an exception out of a process as
        # `type(exc)(*exc.args)`, so a SIGTERM inside a timed run must survive that copy
        super().__init__(code)


def terminate_cleanly() -> None:
    """From now on SIGTERM raises `Terminated` in this process (not in its forked children)."""
    owner = os.getpid()

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != owner:  # a forked worker: die as SIGTERM asks
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        raise Terminated

    signal.signal(signal.SIGTERM, on_sigterm)


def main() -> None:
    try:
        terminate_cleanly()
        try:
            accel.opt_in()  # before any hot module is imported
            notice = accel.install_notice()  # the install could not compile them
            if (notice is not None and os.environ.get("PREFIXSIM_PURE", "") in ("", "0")
                    and sys.stderr.isatty()):  # for a person; pipes and logs stay as they are
                print(notice, file=sys.stderr)
            cli = importlib.import_module("prefixsim.cli")
        except KeyboardInterrupt:
            print("prefixsim: interrupted while starting", file=sys.stderr)
            sys.exit(INTERRUPTED_EXIT)
        cli.main()
    except Terminated:
        print("prefixsim: terminated", file=sys.stderr)
        sys.exit(TERMINATED_EXIT)
    finally:  # the command has ended (its exit status is set): let it end as it was ending
        signal.signal(signal.SIGINT, signal.SIG_IGN)


if __name__ == "__main__":
    main()
