"""Where a decode-only run stands at a given time: pure helpers over a cost model.

A decode run is `steps` identical-batch decode steps whose total time the cost model gives
in one call (`decode_steps_time_s`). When something happens mid-run (an arrival, a router
reading the load), the replica needs how many steps have completed, or which step boundary
comes next. Steps differ only by context growth, so elapsed / mean step lands within a step
or two of the answer; these walk from there with a few cost-model calls.
"""

from __future__ import annotations

from prefixsim.costmodel import CostModel
from prefixsim.costmodel.protocol import DecodeRunTime

BOUNDARY_TIE_S = 1e-9
"""An event this close after a step boundary of a whole run happens at the boundary (a pull
landing there joins the next step; the step after it has not started). A run's boundaries
are one product of the cost model and the same instants reached step by step are sums, a
float's last bits apart; a landing derived from another replica's steps can fall exactly on
a boundary (two requests of equal contexts), and the rounding must not decide the side."""


def steps_done_by(cost_model: CostModel, contexts: tuple[int, ...], steps: int,
                  elapsed_s: float, time_of: DecodeRunTime | None = None) -> int:
    """Most steps (0..steps) of the run whose total time fits in `elapsed_s`
    (`time_of`: the run's `cost_model.decode_run_timer`, when the caller has it)."""
    if time_of is None:
        time_of = cost_model.decode_steps_time_s
    total_s = time_of(contexts, steps)
    if elapsed_s >= total_s:
        return steps
    done = min(steps, max(0, int(elapsed_s / (total_s / steps))))
    while done > 0 and time_of(contexts, done) > elapsed_s:
        done -= 1
    while done < steps and time_of(contexts, done + 1) <= elapsed_s:
        done += 1
    return done


def steps_reaching(cost_model: CostModel, contexts: tuple[int, ...], steps: int,
                   elapsed_s: float) -> int:
    """Fewest steps (0..steps) whose total time reaches `elapsed_s`: the step boundary at
    or after `elapsed_s`."""
    done = steps_done_by(cost_model, contexts, steps, elapsed_s)
    if done < steps and cost_model.decode_steps_time_s(contexts, done) < elapsed_s:
        done += 1
    return done


class RunClock:
    """Steps of one decode run completed by a time, for repeated, mostly increasing queries
    (a router reading a replica's load at every arrival): a cursor on the last answer, so a
    query inside the same step costs no cost-model call and one a step later costs one.
    Same answers as `steps_done_by`."""

    __slots__ = ("cost_model", "contexts", "num_seqs", "steps", "total_s", "done", "done_s",
                 "next_s", "time_of", "steps_grow")

    def __init__(self, cost_model: CostModel, contexts: tuple[int, ...], steps: int,
                 total_s: float) -> None:
        self.cost_model = cost_model
        self.contexts = contexts
        self.num_seqs = len(contexts)
        self.steps = steps
        self.total_s = total_s
        self.time_of = cost_model.decode_run_timer(contexts)
        self.steps_grow = getattr(cost_model, "decode_steps_never_shorten", False)
        # the cursor: `done` steps end at done_s, the next at next_s (-1: not asked yet); a
        # caller may read done directly when done_s <= elapsed < next_s
        self.done = 0
        self.done_s = 0.0
        self.next_s = -1.0

    def steps_done(self, elapsed_s: float) -> int:
        """Most steps (0..steps) whose total time fits in `elapsed_s`."""
        if elapsed_s >= self.total_s:
            return self.steps
        if self.next_s < 0:
            self.next_s = self.time_of(self.contexts, 1)
        if self.done_s <= elapsed_s < self.next_s:
            return self.done
        if self.next_s <= elapsed_s < 2 * self.next_s - self.done_s:
            self._advance(self.done + 1)  # the next step: one call
            if elapsed_s < self.next_s:
                return self.done
        self._advance(steps_done_by(self.cost_model, self.contexts, self.steps, elapsed_s,
                                    self.time_of))
        return self.done

    def steps_done_at_most(self, elapsed_s: float) -> int:
        """An upper bound on `steps_done(elapsed_s)` for a time at or after the last query,
        from the cursor alone (no cost-model call): exact inside the cursor's step; past it,
        when the cost model's decode steps never get shorter as contexts grow
        (`decode_steps_never_shorten`), every later step lasts at least as long as the
        cursor's next one, plus one step for float rounding; else the run's end."""
        next_s, done_s = self.next_s, self.done_s
        if next_s < 0 or elapsed_s < done_s or elapsed_s >= self.total_s:
            return self.steps  # not asked yet (or asked later): the run's end
        if elapsed_s < next_s:
            return self.done
        step_s = next_s - done_s
        if step_s <= 0 or not self.steps_grow:
            return self.steps
        return min(self.steps, self.done + 2 + int((elapsed_s - next_s) / step_s))

    def _advance(self, done: int) -> None:
        time_of = self.time_of
        self.done_s = self.next_s if done == self.done + 1 else time_of(self.contexts, done)
        self.done = done
        self.next_s = time_of(self.contexts, done + 1) if done < self.steps else self.total_s
