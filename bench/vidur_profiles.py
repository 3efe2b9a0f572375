"""Bench: the shipped GPU profiles against Vidur's public data (docs/cost-models.md
"Imported GPU profiles").

For every shipped `<gpu>-<model>-tp<N>` profile: the one command that imports it, whether a
fresh import gives the shipped bytes (the date apart; `~same`: every float within 1e-9, as
another numpy rounds the fit's last digits) and the same bytes twice, the import
time, and the held-out medians per class against the targets, then those with whole blocks
held out (a top range, whole attention rows, a whole model); then the leave-one-model-out
check of the H100-from-A100 borrow rule per donor model. `--write` regenerates the shipped
files (keeping each one's date when nothing else changed).

    .venv/bin/python bench/vidur_profiles.py [VIDUR_DIR] [--write]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from prefixsim.profiles.vidur import VIDUR_GPUS, find_root
from prefixsim.profiles.vidur_borrow import donor_points, leave_one_model_out
from prefixsim.profiles.vidur_import import TARGETS, import_vidur
from prefixsim.profiles.vidur_split import ImportOptions

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DIR = ROOT.parent / "shared" / "gpu-measurements" / "vidur"
PROFILES = ROOT / "prefixsim" / "data" / "profiles"
SHIPPED = [("a100-80g", "llama-2-7b", 1), ("h100-sxm", "llama-2-7b", 1),
           ("a100-80g", "llama-3.1-8b", 1), ("h100-sxm", "llama-3.1-8b", 1)] + [
    (gpu, model, tp) for model in ("llama-2-70b", "llama-3.1-70b")
    for gpu in ("a100-80g", "h100-sxm") for tp in (2, 4, 8)]
CLASSES = ("gemm", "elementwise", "layer", "prefill_attention", "decode_attention",
           "all_reduce", "cpu_overhead", "step")


def options(gpu: str, model: str, tp: int) -> ImportOptions:
    return ImportOptions(model, gpu, tp, borrow="a100-80g" if gpu == "h100-sxm" else None)


def command(gpu: str, model: str, tp: int) -> str:
    borrow = " --borrow a100-80g" if gpu == "h100-sxm" else ""
    return (f"prefixsim profile import-vidur ../shared/gpu-measurements/vidur --model {model} "
            f"--gpu {gpu} --tp {tp}{borrow} -o prefixsim/data/profiles/{gpu}-{model}-tp{tp}"
            ".json")


def _without_date(text: str) -> list[str]:
    return [line for line in text.splitlines() if '"date":' not in line]


def _print_blocks(blocks: dict[str, dict]) -> None:
    """Held-out medians per class when whole blocks are held out (vidur_blocks.py)."""
    print("\nwhole blocks held out (median |relative error|; top_range = top 20% of every "
          "axis, whole_rows = 20% of attention rows, model = GEMMs fitted on the other "
          "models):")
    print(f"{'profile':<30}{'block':<12}" + "".join(f"{c[:11]:>12}" for c in CLASSES))
    for name, kinds in blocks.items():
        for kind, errors in kinds.items():
            cells = "".join(f"{errors[c]['median_rel_error']:>12.1%}" if c in errors
                            else f"{'-':>12}" for c in CLASSES)
            print(f"{name:<30}{kind:<12}{cells}")


def _agreement(a: str, b: str) -> str:
    """'same' (the bytes, the date apart), '~same' (every float within 1e-9 relative:
    another numpy or BLAS rounds the fit's last digits differently) or '' (they differ)."""
    if _without_date(a) == _without_date(b):
        return "same"

    def close(x, y) -> bool:
        if isinstance(x, dict) and isinstance(y, dict):
            return x.keys() == y.keys() and all(close(x[k], y[k]) for k in x
                                                if k != "date")
        if isinstance(x, list) and isinstance(y, list):
            return len(x) == len(y) and all(map(close, x, y))
        if isinstance(x, float) and isinstance(y, float):
            return abs(x - y) <= 1e-9 * max(abs(x), abs(y))
        return x == y

    return "~same" if close(json.loads(a), json.loads(b)) else ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT_DIR)
    parser.add_argument("--write", action="store_true", help="regenerate the shipped files")
    args = parser.parse_args()
    if not args.folder.is_dir():
        print(f"skipped: no Vidur data at {args.folder}")
        return 0
    header = "".join(f"{c[:11]:>12}" for c in CLASSES)
    print(f"{'profile':<30}{'shipped':>9}{'twice':>7}{'s':>6}{header}")
    misses, seconds, blocks = [], [], {}
    for gpu, model, tp in SHIPPED:
        name = f"{gpu}-{model}-tp{tp}"
        path = PROFILES / f"{name}.json"
        date = (json.loads(path.read_text())["provenance"]["date"] if path.is_file()
                else datetime.now(UTC).isoformat(timespec="seconds"))
        started = time.perf_counter()
        text = import_vidur(args.folder, options(gpu, model, tp), date).to_json()
        seconds.append(time.perf_counter() - started)
        twice = import_vidur(args.folder, options(gpu, model, tp), "another date").to_json()
        same = path.is_file() and _agreement(path.read_text(), text)
        if args.write and same != "same":
            path.write_text(text)
        heldout = json.loads(text)["heldout"]
        blocks[name] = json.loads(text).get("heldout_blocks", {})
        cells = ""
        for cls in CLASSES:
            value = heldout.get(cls, {}).get("median_rel_error")
            mark = "" if value is None or cls not in TARGETS or value <= TARGETS[cls] else "!"
            cells += f"{'-' if value is None else format(value, '.1%') + mark:>12}"
            if mark:
                misses.append(f"{name} {cls}")
        print(f"{name:<30}{same or 'DIFFERS':>9}{_agreement(twice, text) or 'DIFFERS':>7}"
              f"{seconds[-1]:>6.1f}{cells}")
    print("targets (held-out medians): " + ", ".join(f"{c} <= {t:.0%}"
                                                     for c, t in TARGETS.items()))
    print(f"targets missed: {', '.join(misses) or 'none'}; median import time "
          f"{statistics.median(seconds):.1f} s")
    _print_blocks(blocks)
    root = find_root(args.folder)
    points = donor_points(root, VIDUR_GPUS["a100-80g"][0], VIDUR_GPUS["h100-sxm"][0], "")
    lomo = leave_one_model_out(points)
    print("\nborrow rule H100 = A100 x donors' ratio, each donor predicted from the others "
          "(median / p90 |relative error|):")
    for key, value in lomo.items():
        print(f"  {key:<48}{value['median_rel_error']:>8.1%}{value['p90_rel_error']:>8.1%}"
              f"{value['n']:>8}")
    print("\none command per shipped profile:")
    for spec in SHIPPED:
        print("  " + command(*spec))
    return 0


if __name__ == "__main__":
    sys.exit(main())
