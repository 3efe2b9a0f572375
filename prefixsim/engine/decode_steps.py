"""Where a decode-only run stands at a given time: pure helpers over a cost model.

A decode run is `steps` identical-batch decode steps whose total time the cost model gives
in one call (`decode_steps_time_s`). When something happens mid-run (an arrival, a router
reading the load), the replica needs how many steps have completed, or which step boundary
comes next. Steps differ only by context growth, so elapsed / mean step lands within a step
or two of the answer; these walk from there with a few cost-model calls.
"""

from __future__ import annotations

from prefixsim.costmodel import CostModel


def steps_done_by(cost_model: CostModel, contexts: tuple[int, ...], steps: int,
                  elapsed_s: float) -> int:
    """Most steps (0..steps) of the run whose total time fits in `elapsed_s`."""
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
