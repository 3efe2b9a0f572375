"""`prefixsim calibrate`: time real operators with torch, fit, write a profile; or validate one."""

from __future__ import annotations

import time
from pathlib import Path

import click

from prefixsim.cli.app import app, fail_cleanly
from prefixsim.cli.files import check_output_file, write_text
from prefixsim.cli.progress import Progress
from prefixsim.costmodel.operators import LayerDims
from prefixsim.costmodel.profile import load_profile
from prefixsim.errors import InputError
from prefixsim.presets import MODELS, get_model, load_custom_presets
from prefixsim.profiles.calibrate import TARGETS, calibrate, import_torch, validate

QUICK_CPU_TARGET_S = 120.0


def _print_errors(errors: dict[str, dict], title: str) -> None:
    click.echo(f"{title:<20}{'n':>4}{'median':>9}{'p90':>9}{'target':>9}")
    for cls, summary in errors.items():
        target = TARGETS.get(cls)
        mark = "" if target is None else (
            "  ok" if summary["median_rel_error"] <= target else "  MISSED")
        target_text = "-" if target is None else f"<={target:.0%}"
        click.echo(f"{cls:<20}{summary['n']:>4}{summary['median_rel_error']:>9.1%}"
                   f"{summary['p90_rel_error']:>9.1%}{target_text:>9}{mark}")


def _progress(bar: Progress):
    def update(done: int, total: int) -> None:
        if bar.total != total:
            bar.reset(total)
        bar.update(done - bar.count)
    return update


@app.command("calibrate")
@click.option("--model", "model_name",
              help=f"Model whose layer shapes are timed: {', '.join(MODELS)} (or one from "
                   "--presets).")
@click.option("--presets", "presets_path", type=click.Path(dir_okay=False),
              help="YAML file with custom `models:` (ModelSpec fields).")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@click.option("--dtype", type=click.Choice(["bf16", "fp16", "fp32"]),
              help="Linear-layer dtype; default bf16 on CUDA, fp32 on CPU (CPU attention is "
                   "always fp32).")
@click.option("--quick", is_flag=True, help="Fewer, smaller shapes (a 2-core CPU: < 2 min).")
@click.option("--threads", type=int,
              help="torch CPU threads (default 1: timed by thread CPU time, robust to a "
                   "shared machine).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed of shape sampling, order and hold-out.")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="Profile to write; default <device>-<model>.json.")
@click.option("--validate", "validate_path",
              help="Re-measure fresh random shapes and print PROFILE's errors (a path or a "
                   "shipped profile name); writes nothing.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@fail_cleanly
def calibrate_command(model_name: str | None, presets_path: str | None, device: str,
                      dtype: str | None, quick: bool, threads: int | None, seed: int,
                      output: str | None, validate_path: str | None, quiet: bool) -> None:
    """Time attention and GEMMs with torch on this machine, fit a cost model, write a profile.

    \b
    Examples:
      prefixsim calibrate --model llama-3.1-8b --device cpu --quick -o cpu-8b.json
      prefixsim calibrate --validate cpu-8b.json
      prefixsim run --trace traces/demo_chat.jsonl --profile cpu-8b.json
    """
    import_torch()  # before anything else: without torch say how to install it (exit 2)
    if threads is not None and threads < 1:
        raise InputError(f"must be >= 1, got {threads}", field="--threads")
    if validate_path is not None:  # the profile says its shapes, dtype and threads
        given = [flag for flag, value in (("--model", model_name), ("--presets", presets_path),
                                          ("--dtype", dtype), ("--threads", threads),
                                          ("-o", output)) if value is not None]
        if given:
            raise InputError("--validate re-measures the shapes the profile was fitted on, "
                             f"so {given[0]} is not read: leave it out", field=given[0])
    if validate_path is None and output is not None:
        check_output_file(Path(output))  # before minutes of timing, not after
    started = time.perf_counter()
    with Progress("calibrate", "shape", total=1, quiet=quiet) as bar:
        if validate_path is not None:
            profile = load_profile(validate_path)
            errors = validate(profile, seed=seed + 1, quick=quick or None,
                              on_progress=_progress(bar))
        else:
            dims = LayerDims.from_spec(_model(model_name, presets_path))
            profile = calibrate(dims, device, dtype, quick, seed, threads=threads,
                                on_progress=_progress(bar))
    wall_s = time.perf_counter() - started
    prov = profile.provenance
    click.echo(f"device: {prov.device} ({prov.device_name}), torch {prov.torch_version}, "
               f"{prov.dtype} linear / {prov.attention_dtype} attention")
    click.echo(f"model shapes: {prov.model.name}; {prov.backend}")
    if validate_path is not None:
        _print_errors(errors, "validation")
        click.echo(f"wall time: {wall_s:.1f} s")
        return
    _print_errors({k: v.model_dump() for k, v in profile.heldout.items()}, "held-out")
    if "gemm" in profile.heldout_linear:
        linear = profile.heldout_linear["gemm"]
        click.echo(f"(gemm as a linear a*FLOPs + b*bytes + c fit: median "
                   f"{linear.median_rel_error:.1%}, p90 {linear.p90_rel_error:.1%})")
    quick_note = ""
    if quick and device == "cpu":
        verdict = "ok" if wall_s < QUICK_CPU_TARGET_S else "MISSED"
        quick_note = f" (target for --quick on CPU: < {QUICK_CPU_TARGET_S:.0f} s, {verdict})"
    click.echo(f"wall time: {wall_s:.1f} s{quick_note}; CPU time {prov.cpu_time_s:.1f} s "
               "(on a shared machine the rest went to other processes)")
    path = Path(output or f"{device}-{prov.model.name}.json")
    write_text(path, profile.to_json())
    click.echo(f"profile: {path}")


def _model(name: str | None, presets_path: str | None):
    if name is None:
        raise InputError("pass --model NAME (or --validate PROFILE)", field="--model")
    if presets_path is not None:
        custom, _ = load_custom_presets(presets_path)
        if name in custom:
            return custom[name]
    return get_model(name, field="--model")
