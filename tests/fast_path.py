"""Reading one trace file both ways, through a reader's fast path and with the fast path
turned off, so the trace tests can check the two give the same requests or the same
one-line error (docs/input-rules.md I1).

Owns only the switch and the comparison; what each fast path is lives in prefixsim/trace/.
"""

from types import ModuleType

from prefixsim.errors import InputError
from prefixsim.trace import ReadOptions, read_trace


def read_both(path, trace_format: str, module: ModuleType, fast_function: str,
              options: ReadOptions | None = None) -> list:
    """[fast, exact]: each the requests read, or the InputError's message. The exact read
    replaces `module.fast_function` by one that declines (returns None)."""
    results = []
    for fast in (True, False):
        original = getattr(module, fast_function)
        if not fast:
            setattr(module, fast_function, lambda *args: None)
        try:
            results.append(read_trace(path, trace_format, options))
        except InputError as error:
            results.append(str(error))
        finally:
            setattr(module, fast_function, original)
    return results


def assert_same_reads(fast, exact) -> None:
    """The two reads of `read_both` agree: the same error message, or the same requests,
    time shift, reordered rows and skipped lines."""
    if isinstance(exact, str):
        assert fast == exact
        return
    assert list(fast.requests) == list(exact.requests)
    assert (fast.time_shift_s, fast.reordered_rows, fast.skipped_lines) == (
        exact.time_shift_s, exact.reordered_rows, exact.skipped_lines)
