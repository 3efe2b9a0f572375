"""Bench: `calibrate --quick` on this machine against its targets, with baselines run here.

Prints the wall and CPU time of a quick CPU calibration (target: under 2 minutes on a 2-core
CPU) and the held-out median / p90 relative error per class (targets: <= 10% gemm,
prefill_attention, decode_attention; <= 15% layer). Baselines measured in the same run:
- the plain linear GEMM form t = a*FLOPs + b*bytes + c (the profile keeps its errors),
- with --naive, the same shapes timed by a single wall-clock pass (one call per shape, no
  repeats), the protocol docs/cost-models.md warns about on a shared machine.

    .venv/bin/python bench/calibrate_quick.py [--model llama-3.1-8b] [--naive]
"""

from __future__ import annotations

import argparse
import dataclasses
import time

from prefixsim.costmodel.operators import LayerDims
from prefixsim.presets import MODELS
from prefixsim.profiles.calibrate import TARGETS, calibrate
from prefixsim.profiles.shapes import shape_ranges


def report(title: str, heldout: dict, wall_s: float, cpu_s: float) -> None:
    print(f"--- {title}: wall {wall_s:.1f} s, CPU {cpu_s:.1f} s "
          f"(target < 120 s: {'ok' if wall_s < 120 else 'MISSED'})")
    for cls, summary in heldout.items():
        target = TARGETS.get(cls)
        verdict = "" if target is None else (
            "ok" if summary.median_rel_error <= target else "MISSED")
        print(f"  {cls:<18} n={summary.n:<3} median {summary.median_rel_error:6.1%}  "
              f"p90 {summary.p90_rel_error:6.1%}  {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="llama-3.1-8b", choices=sorted(MODELS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--naive", action="store_true",
                        help="also time a single wall-clock pass, all cores (baseline)")
    args = parser.parse_args()
    dims = LayerDims.from_spec(MODELS[args.model])

    started = time.perf_counter()
    profile = calibrate(dims, "cpu", quick=True, seed=args.seed)
    wall_s = time.perf_counter() - started
    report(f"robust protocol ({profile.provenance.backend})", profile.heldout, wall_s,
           profile.provenance.cpu_time_s)
    linear = profile.heldout_linear["gemm"]
    print(f"  baseline gemm form a*FLOPs + b*bytes + c: median {linear.median_rel_error:.1%}, "
          f"p90 {linear.p90_rel_error:.1%}")

    if args.naive:
        ranges = dataclasses.replace(shape_ranges("cpu", quick=True), passes=1, repeats=1)
        started = time.perf_counter()
        naive = calibrate(dims, "cpu", quick=True, seed=args.seed, ranges=ranges,
                          threads=2)
        report("baseline: one pass, one call per shape, 2 threads, wall clock",
               naive.heldout, time.perf_counter() - started, naive.provenance.cpu_time_s)


if __name__ == "__main__":
    main()
