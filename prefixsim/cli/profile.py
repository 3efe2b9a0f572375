"""`prefixsim profile`: import public GPU measurements into a profile, check one, list the
shipped ones (docs/cost-models.md "Imported GPU profiles")."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime
from pathlib import Path

import click

from prefixsim.cli.app import PathParam, app, fail_cleanly
from prefixsim.cli.files import write_text
from prefixsim.costmodel.profile import Heldout, Profile, load_profile, shipped_profiles
from prefixsim.errors import InputError
from prefixsim.profiles.vidur import VIDUR_GPUS, VIDUR_MODELS
from prefixsim.profiles.vidur_import import TARGETS, import_vidur, validate_profile
from prefixsim.profiles.vidur_split import ImportOptions


@app.group("profile")
def profile_group() -> None:
    """Profiles of the fitted cost model: import public GPU measurements, validate, list.

    \b
    Examples:
      prefixsim profile list
      prefixsim profile import-vidur ../shared/gpu-measurements/vidur \\
          --model llama-3.1-8b --gpu a100-80g --tp 1 -o a100-80g-llama-3.1-8b-tp1.json
      prefixsim run --trace traces/demo_chat.jsonl --gpu a100-80g \\
          --profile a100-80g-llama-3.1-8b-tp1
    """


def print_errors(errors: dict[str, Heldout | dict], title: str, targets: bool = True) -> None:
    click.echo(f"{title:<20}{'n':>6}{'median':>9}{'p90':>9}" + (f"{'target':>9}"
                                                             if targets else ""))
    for cls, summary in errors.items():
        s = summary if isinstance(summary, dict) else summary.model_dump()
        line = (f"{cls:<20}{s['n']:>6}{s['median_rel_error']:>9.1%}"
                f"{s['p90_rel_error']:>9.1%}")
        target = TARGETS.get(cls)
        if targets and target is not None:
            mark = "ok" if s["median_rel_error"] <= target else "MISSED"
            line += f"{'<=' + format(target, '.0%'):>9}  {mark}"
        click.echo(line)


def describe_profile(profile: Profile) -> None:
    prov, source = profile.provenance, profile.source
    tps = ", ".join(str(t) for t in profile.covers_tp)
    click.echo(f"profile: {prov.model.name} on {prov.hardware_preset or prov.device} "
               f"({prov.device_name}), covers tp {tps}")
    if source is not None:
        click.echo(f"source: {source.repo} @ {source.commit[:7]}, seed {source.seed}, "
                   f"{source.holdout_fraction:.0%} held out")
        for item in source.files:
            click.echo(f"  {item.path}: {item.rows_used:,} of {item.rows:,} rows")
        for item in source.borrowed:
            click.echo(f"  borrowed {item.part}: {item.source} ({item.rule})")
    if profile.cpu_overhead is not None:
        click.echo(f"cpu overhead: {profile.cpu_overhead.framework}")


@profile_group.command("import-vidur")
@click.argument("folder", type=PathParam(file_okay=False, path_type=Path))
@click.option("--model", "model_name", help=f"Model preset: {', '.join(VIDUR_MODELS)}.")
@click.option("--gpu", help=f"GPU preset: {', '.join(VIDUR_GPUS)}.")
@click.option("--tp", type=int, help="Tensor-parallel degree (1, 2, 4 or 8).")
@click.option("--borrow", help="Scale parts the GPU lacks (e.g. H100 attention) from this "
                               "GPU preset; without it they are refused.")
@click.option("--no-cpu-overhead", is_flag=True,
              help="Leave Vidur's vLLM-2024 CPU table out (runs use the roofline's default "
                   "per-step CPU time instead).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed of the 20% hold-out.")
@click.option("-o", "--output", type=PathParam(dir_okay=False, path_type=Path),
              help="Profile to write; default <gpu>-<model>-tp<N>.json.")
@click.option("--validate", "validate_path",
              help="Instead: print PROFILE's errors on the points its import held out, read "
                   "again from FOLDER (a path or a shipped name); writes nothing.")
@fail_cleanly
def import_vidur_command(folder: Path, model_name: str | None, gpu: str | None,
                         tp: int | None, borrow: str | None, no_cpu_overhead: bool, seed: int,
                         output: Path | None, validate_path: str | None) -> None:
    """Build a profile from Vidur's public GPU profiling data in FOLDER.

    Maps Vidur's kernels onto the profile's classes, merges duplicate points, holds out a
    seeded 20%, keeps the rest as tables, fits the fallback coefficients and prints the
    held-out errors per class. Parts the GPU lacks are refused unless --borrow is given.

    \b
    Example:
      prefixsim profile import-vidur ../shared/gpu-measurements/vidur \\
          --model llama-3.1-8b --gpu h100-sxm --tp 1 --borrow a100-80g
    """
    if validate_path is not None:
        profile = load_profile(validate_path)
        if profile.source is None:
            raise InputError("not an imported profile (no source)", file=validate_path)
        describe_profile(profile)
        errors, linear = validate_profile(profile, folder)
        print_errors(errors, "held-out (again)")
        print_errors(linear, "linear form", targets=False)
        stale = [c for c, s in errors.items() if c in profile.heldout and abs(
            s["median_rel_error"] - profile.heldout[c].median_rel_error) > 1e-9]
        click.echo("stored errors: " + ("match" if not stale else
                                        f"differ for {', '.join(stale)}"))
        return
    for name, value in (("--model", model_name), ("--gpu", gpu), ("--tp", tp)):
        if value is None:
            raise InputError(f"pass {name} (or --validate PROFILE)", field=name)
    assert model_name is not None and gpu is not None and tp is not None
    if tp < 1:
        raise InputError(f"must be >= 1, got {tp}", field="--tp")
    options = ImportOptions(model_name, gpu, tp, seed, borrow=borrow,
                            cpu_overhead=not no_cpu_overhead)
    date = datetime.now(UTC).isoformat(timespec="seconds")
    profile = import_vidur(folder, options, date)
    describe_profile(profile)
    print_errors(profile.heldout, "held-out")
    print_errors(profile.heldout_linear, "linear form", targets=False)
    if profile.heldout_borrow_rule:
        print_errors(profile.heldout_borrow_rule, "borrow rule (LOMO)", targets=False)
    for kind, errors in profile.heldout_blocks.items():
        print_errors(errors, f"block held out: {kind}", targets=False)
    path = output or Path(f"{gpu}-{model_name}-tp{tp}.json")
    write_text(path, profile.to_json())
    click.echo(f"profile: {path}")


# `profile list`'s second table: the harder splits (docs/cost-models.md "Block hold-outs").
HARDER_SPLITS = (("top_range", "gemm", "top gemm"), ("top_range", "prefill_attention",
                 "top prefill"), ("top_range", "step", "top step"),
                 ("whole_rows", "prefill_attention", "rows prefill"),
                 ("whole_rows", "decode_attention", "rows decode"), ("model", "gemm",
                 "model gemm"), ("borrow", "gemm", "borrow gemm"))


def _median_cell(errors: dict[str, Heldout], cls: str, width: int) -> str:
    return (f"{errors[cls].median_rel_error:>{width}.1%}" if cls in errors
            else f"{'-':>{width}}")


@profile_group.command("list")
@fail_cleanly
def list_command() -> None:
    """The shipped profiles (`--profile NAME`) with their held-out medians.

    The first table holds out a random 20% of each table's points: they lie between
    measured neighbours of one measurement session, so their errors are interpolation
    errors. The second holds out whole blocks (docs/cost-models.md "Block hold-outs"):
    the top 20% of every axis (`top`), whole prefill chunk sizes and decode batch sizes
    (`rows`), the whole model (`model`: GEMMs fitted on the other models of that GPU and
    TP) and, for a profile borrowed from another GPU, the borrow rule's
    leave-one-model-out error (`borrow`). Neither measures another session, attention
    backend or GPU: across those errors are 10-55%.
    """
    classes = {"gemm": "gemm", "elementwise": "elementwise", "prefill_attention": "prefill",
               "decode_attention": "decode", "step": "step"}
    profiles = {name: load_profile(name) for name in sorted(shipped_profiles())}
    click.echo("random 20% of points held out (interpolation within one session), median "
               "error")
    click.echo(f"{'name':<28}{'tp':>3}" + "".join(f"{c:>12}" for c in classes.values())
               + "  borrowed")
    for name, profile in profiles.items():
        cells = "".join(_median_cell(profile.heldout, c, 12) for c in classes)
        tps = ",".join(str(t) for t in profile.covers_tp)
        parts = [] if profile.source is None else [
            b.part for b in profile.source.borrowed if b.part != "attention heads"]
        click.echo(f"{name:<28}{tps:>3}{cells}  {', '.join(parts) or '-'}")
    click.echo("")
    click.echo("whole blocks held out (extrapolation), median error")
    click.echo(f"{'name':<28}" + "".join(f"{title:>13}" for _, _, title in HARDER_SPLITS))
    for name, profile in profiles.items():
        blocks = {**profile.heldout_blocks, "borrow": profile.heldout_borrow_rule}
        if not any(blocks.values()):
            continue
        cells = "".join(_median_cell(blocks.get(kind, {}), cls, 13)
                        for kind, cls, _ in HARDER_SPLITS)
        click.echo(f"{name:<28}{cells}")
    click.echo(textwrap.fill(LIST_FOOTNOTE, width=88))


LIST_FOOTNOTE = (
    "top: the top 20% of every axis; rows: whole chunk sizes and batch sizes; model: GEMMs "
    "fitted on the other models; borrow: the rule that scales another GPU's kernels, one "
    "donor model left out at a time. Across measurement sessions, attention backends or "
    "GPUs the errors are 10-55% (docs/cost-models.md \"Block hold-outs\"). Not in the "
    "borrowed column: every attention grid is the one public grid's heads (32 query / 4 KV "
    "per GPU) scaled to the profile's where they differ, as a run's note says. `--profile "
    "NAME` selects a profile.")
