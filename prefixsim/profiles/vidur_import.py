"""A profile from Vidur's public GPU measurements (docs/cost-models.md "Imported GPU
profiles"): `import_vidur` reads and splits them (vidur_split.py), keeps the training points
as the profile's tables (times to 5 significant digits), fits the per-class coefficients the
fitted model falls back on (fit.py: GEMMs for the LM head and unmeasured shapes, attention
for contrast), and judges the profile on the held-out points through the same code the
fitted model runs (`heldout_errors`, also what `--validate` prints). The output depends only
on the data, the options and the date.

Held-out classes: `gemm`, `elementwise`, `layer` (a layer's GEMMs and element-wise kernels),
`prefill_attention`, `decode_attention`, `all_reduce` and `send_recv` (every GPU count),
`cpu_overhead`, and `step`: at each held-out token count T (with TP, those whose
all-reduce message lies within the measured sizes) a decode-like step,
layers x (layer + 2 all-reduces of T x hidden x 2 bytes) + embedding + final norm + the CPU
time at batch T (clamped to the measured batch sizes), against the same sum of measured
values (all-reduce and CPU read between their nearest measurements).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from prefixsim._version import __version__
from prefixsim.costmodel.attention_grid import DecodeTimes, PrefillTimes
from prefixsim.costmodel.collectives import ACTIVATION_BYTES
from prefixsim.costmodel.fitted import FittedCostModel, Predictor
from prefixsim.costmodel.measured import CpuTimes, ElementwiseTimes, elementwise_widths
from prefixsim.costmodel.operators import (
    FEATURES,
    DecodeAttention,
    FeatureRules,
    Gemm,
    LayerDims,
    PrefillAttention,
)
from prefixsim.costmodel.profile import Heldout, Profile, profile_from_mapping
from prefixsim.costmodel.profile_parts import ELEMENTWISE_OPS
from prefixsim.costmodel.tables import Table1D
from prefixsim.presets import MODELS, get_gpu, get_model
from prefixsim.profiles.fit import error_summary, fit_relative, relative_errors
from prefixsim.profiles.vidur import VIDUR_COMMIT, VIDUR_GPUS, VIDUR_MODELS, VIDUR_REPO
from prefixsim.profiles.vidur_blocks import BLOCK_CLASSES, other_model_gemms, top_range, whole_rows
from prefixsim.profiles.vidur_split import ImportOptions, Measured, measure

FEATURE_RULES = FeatureRules(gemm_dtype_bytes=2, attention_dtype_bytes=2, prefill_skips_masked=True)
LAYER_OPS = ("qkv", "o", "gate_up", "down")
TARGETS = {"gemm": 0.03, "elementwise": 0.05, "prefill_attention": 0.15,
           "decode_attention": 0.15, "all_reduce": 0.05, "step": 0.05}
"""Held-out median targets (docs/cost-models.md "Imported GPU profiles")."""
FRAMEWORK = "vLLM of 2024-05 (about v0.4) on an A100 host, Vidur's cpu_overheads profile"


def _sig(value: float) -> float:
    return float(f"{value:.5g}")


def _dims(spec, tp: int) -> LayerDims:
    return replace(LayerDims.from_spec(spec, tp), num_kv_heads=spec.kv_heads_per_gpu(tp))


def _fit(features: list, times: np.ndarray) -> np.ndarray:
    return fit_relative(np.array(features), np.asarray(times))


def _coefficients(m: Measured, dims: LayerDims) -> dict[str, dict[str, float]]:
    weights = dims.weights()
    gemm_x, gemm_t = [], []
    for name in LAYER_OPS:
        times = m.compute.times_s[name]
        for tokens in m.tokens_train:
            gemm_x.append(Gemm(int(tokens), *weights[name]).features(2))
            gemm_t.append(times.loc[tokens])
    a = m.attention
    heads = (a.num_heads, a.num_kv_heads, a.head_dim)
    pre = m.prefill_train
    pre_x = [FEATURE_RULES.features(PrefillAttention(int(n), int(c), *heads))
             for n, c in zip(pre["prefill_chunk_size"], pre["kv_cache_size"], strict=True)]
    dec = m.decode_train
    dec_x = [FEATURE_RULES.features(DecodeAttention((int(kv),) * int(b), *heads))
             for b, kv in zip(dec["batch_size"], dec["kv_cache_size"], strict=True)]
    vectors = {"gemm": _fit(gemm_x, np.array(gemm_t)),
               "prefill_attention": _fit(pre_x, pre["time_s"].to_numpy()),
               "decode_attention": _fit(dec_x, dec["time_s"].to_numpy())}
    return {cls: {f"s_per_{n}": float(v) for n, v in zip(FEATURES[cls], vec, strict=True)}
            for cls, vec in vectors.items()}


def _grid(frame, key: str, x: str, a) -> dict:
    rows = [{"key": int(k), "x": [int(v) for v in g[x]],
             "time_s": [_sig(t) for t in g["time_s"]]}
            for k, g in frame.sort_values([key, x]).groupby(key)]
    floor = min(min(r["time_s"]) for r in rows)
    return {"num_heads": a.num_heads, "num_kv_heads": a.num_kv_heads, "head_dim": a.head_dim,
            "floor_s": floor, "rows": rows}


def _table(series) -> tuple[list[int], list[float]]:
    return [int(x) for x in series.index], [_sig(t) for t in series.to_numpy()]


def build_profile(m: Measured, options: ImportOptions, date: str) -> Profile:
    """The profile of `m`'s training points, judged on its test points and on the block
    hold-outs of vidur_blocks.py."""
    profile = _unjudged(m, options, date)
    heldout, linear = heldout_errors(profile, m)
    return profile.model_copy(update={
        "heldout": {k: Heldout.model_validate(v) for k, v in heldout.items()},
        "heldout_linear": {k: Heldout.model_validate(v)
                           for k, v in linear.items()},
        "heldout_borrow_rule": {k: Heldout.model_validate(v)
                                for k, v in m.borrow_heldout.items() if ":" not in k},
        "heldout_blocks": {kind: {k: Heldout.model_validate(v) for k, v in errors.items()}
                           for kind, errors in block_errors(m, options, date).items()}})


def block_errors(m: Measured, options: ImportOptions, date: str) -> dict[str, dict]:
    """Errors per class of profiles fitted without whole blocks, on those blocks."""
    out: dict[str, dict] = {}
    for kind, split in (("top_range", top_range(m)), ("whole_rows", whole_rows(m, options.seed))):
        errors, _ = heldout_errors(_unjudged(split, options, date), split)
        out[kind] = {c: errors[c] for c in BLOCK_CLASSES[kind] if c in errors}
    (other_x, other_t), (own_x, own_t) = other_model_gemms(m, options.tp)
    if other_x and not any(b.part == "gemm, elementwise" for b in m.borrowed):
        predicted = np.array(own_x) @ _fit(other_x, np.array(other_t))
        out["model"] = {"gemm": error_summary(relative_errors(predicted, own_t))}
    return {kind: errors for kind, errors in out.items() if errors}


def _unjudged(m: Measured, options: ImportOptions, date: str) -> Profile:
    """The profile of `m`'s training points, its held-out errors placeholders."""
    spec, gpu_dir = get_model(options.model), VIDUR_GPUS[options.gpu][0]
    dims = _dims(spec, options.tp)
    train = m.compute.times_s.loc[m.tokens_train]
    tokens = [int(t) for t in m.tokens_train]
    weights = dims.weights()
    gemm_tables = [{"in_features": weights[n][0], "out_features": weights[n][1],
                    "tokens": tokens, "time_s": [_sig(t) for t in train[n]]}
                   for n in LAYER_OPS]
    widths = elementwise_widths(dims)
    elementwise = {op: {"width": widths[op], "tokens": tokens,
                        "time_s": [_sig(t) for t in train[op]]} for op in ELEMENTWISE_OPS}
    a = m.attention
    rule = (f"grids of {a.path.parent.name} at TP {a.tp} ({a.num_heads} query / "
            f"{a.num_kv_heads} KV heads per GPU, head dim {a.head_dim}); other heads scale "
            "the time above the floor by query heads (prefill) and KV heads (decode)")
    if any(b.part == "attention" for b in m.borrowed):
        rule += "; times scaled from another GPU (source.borrowed)"
    collectives = {name: [{"num_gpus": n, **dict(zip(("bytes", "time_s"), _table(train_s),
                                                     strict=True))}
                          for n, (train_s, _, _) in tables.items()]
                   for name, tables in m.collectives.items()}
    cpu = None
    if m.cpu is not None:
        batch, times = _table(m.cpu[0])
        cpu = {"batch_sizes": batch, "time_s": times, "measured_tp": m.cpu_measured_tp,
               "framework": FRAMEWORK, "components": "schedule + prepare_inputs_e2e + "
               "sampler_e2e + process_model_outputs (medians)"}
    device = VIDUR_GPUS[options.gpu][2] + " (Vidur's profiling data)"
    data = {
        "schema": "prefixsim-profile/1",
        "provenance": {
            "device": "cuda", "device_name": device, "hardware_preset": options.gpu,
            "backend": "sarathi-serve layers: cuBLAS GEMMs, FlashAttention, NCCL "
                       "(CUDA-event and Kineto timings, kernel time only)",
            "dtype": "fp16", "attention_dtype": "fp16", "date": date,
            "prefixsim_version": __version__,
            "model": LayerDims.from_spec(spec).to_dict(), "seed": options.seed},
        "rules": {"gemm_dtype_bytes": 2, "attention_dtype_bytes": 2,
                  "prefill_skips_masked": True},
        "coefficients": _coefficients(m, dims),
        "gemm_tables": gemm_tables,
        "heldout": {c: {"median_rel_error": 0, "p90_rel_error": 0, "n": 1}
                    for c in ("gemm", "prefill_attention", "decode_attention", "layer")},
        "covers_tp": [options.tp],
        "elementwise": elementwise,
        "attention": {"prefill": _grid(m.prefill_train, "prefill_chunk_size",
                                       "kv_cache_size", a),
                      "decode": _grid(m.decode_train, "batch_size", "kv_cache_size", a),
                      "rule": rule},
        "collectives": collectives,
        "cpu_overhead": cpu,
        "source": {"kind": "vidur", "repo": VIDUR_REPO, "commit": VIDUR_COMMIT,
                   "model": VIDUR_MODELS[options.model], "gpu": gpu_dir, "tp": options.tp,
                   "seed": options.seed, "holdout_fraction": options.holdout_fraction,
                   "borrow": options.borrow, "cpu_overhead": options.cpu_overhead,
                   "files": [f.model_dump() for f in m.files],
                   "borrowed": [b.model_dump() for b in m.borrowed]},
    }
    return profile_from_mapping(data, source="(import)")


def heldout_errors(profile: Profile, m: Measured) -> tuple[dict, dict]:
    """(errors of `profile` on `m`'s test points per class, errors of the linear forms)."""
    spec = MODELS[profile.provenance.model.name]
    tp = profile.covers_tp[0]
    dims = _dims(spec, tp)
    predictor = Predictor.from_profile(profile)
    linear = Predictor(predictor.rules, predictor.coefficients)
    test = m.compute.times_s.loc[m.tokens_test]
    errs: dict[str, np.ndarray] = {}
    lin: dict[str, np.ndarray] = {}
    weights = dims.weights()
    gemm_ops = [[Gemm(int(t), *weights[n]) for t in test.index] for n in LAYER_OPS]
    measured_gemm = np.concatenate([test[n].to_numpy() for n in LAYER_OPS])
    errs["gemm"] = relative_errors(
        [predictor.time_s([op]) for ops in gemm_ops for op in ops], measured_gemm)
    lin["gemm"] = relative_errors([linear.time_s([op]) for ops in gemm_ops for op in ops],
                                  measured_gemm)
    elementwise = ElementwiseTimes(profile.elementwise, dims)
    errs["elementwise"] = relative_errors(
        [elementwise.op_s(op, int(t)) for op in ELEMENTWISE_OPS for t in test.index],
        np.concatenate([test[op].to_numpy() for op in ELEMENTWISE_OPS]))
    layer_measured = test[list(LAYER_OPS)].sum(axis=1) + test[
        ["input_norm", "post_attention_norm", "rope", "activation"]].sum(axis=1) \
        + 2 * test["residual_add"]
    errs["layer"] = relative_errors(
        [sum(predictor.time_s([ops[i]]) for ops in gemm_ops) + elementwise.layer_s(int(t))
         for i, t in enumerate(test.index)], layer_measured.to_numpy())
    assert profile.attention is not None and profile.collectives is not None
    att = profile.attention
    prefill = PrefillTimes(att.prefill, att.prefill.num_heads, att.prefill.head_dim)
    pre = m.prefill_test
    errs["prefill_attention"] = relative_errors(
        [prefill.chunk_s(int(n), int(c)) for n, c in
         zip(pre["prefill_chunk_size"], pre["kv_cache_size"], strict=True)], pre["time_s"])
    heads = (att.prefill.num_heads, att.prefill.num_kv_heads, att.prefill.head_dim)
    lin["prefill_attention"] = relative_errors(
        [linear.time_s([PrefillAttention(int(n), int(c), *heads)]) for n, c in
         zip(pre["prefill_chunk_size"], pre["kv_cache_size"], strict=True)], pre["time_s"])
    decode = DecodeTimes(att.decode, att.decode.num_kv_heads, att.decode.head_dim)
    dec = m.decode_test
    errs["decode_attention"] = relative_errors(
        [decode.batch_s(int(b), float(kv)) for b, kv in
         zip(dec["batch_size"], dec["kv_cache_size"], strict=True)], dec["time_s"])
    lin["decode_attention"] = relative_errors(
        [linear.time_s([DecodeAttention((int(kv),) * int(b), *heads)]) for b, kv in
         zip(dec["batch_size"], dec["kv_cache_size"], strict=True)], dec["time_s"])
    for name, tables in m.collectives.items():
        stored = {t.num_gpus: t for t in getattr(profile.collectives, name)}
        errs[name] = np.concatenate([relative_errors(
            Table1D(stored[n].bytes, stored[n].time_s).times_s_at(s.index.to_numpy()),
            s.to_numpy()) for n, (_, s, _) in tables.items()])
    if m.cpu is not None and profile.cpu_overhead is not None:
        cpu = CpuTimes(profile.cpu_overhead)
        errs["cpu_overhead"] = relative_errors([cpu.time_s(int(b)) for b in m.cpu[1].index],
                                               m.cpu[1].to_numpy())
    errs["step"] = _step_errors(profile, m, spec, tp, layer_measured, test)
    return ({k: error_summary(v) for k, v in errs.items() if len(v)},
            {k: error_summary(v) for k, v in lin.items() if len(v)})


def _step_errors(profile: Profile, m: Measured, spec, tp: int, layer_measured, test):
    model = FittedCostModel(spec, get_gpu(profile.provenance.hardware_preset), tp,
                            profile=profile)
    layers = spec.num_layers
    if tp > 1:  # only where the all-reduce message was measured
        _, _, full = m.collectives["all_reduce"][tp]
        num_bytes = test.index.to_numpy() * spec.hidden_size * ACTIVATION_BYTES
        inside = num_bytes <= full.index.max()
        test, layer_measured, num_bytes = test[inside], layer_measured[inside], num_bytes[inside]
    measured = layers * layer_measured + test["embedding"] + test["input_norm"]
    if tp > 1:
        measured += 2 * layers * np.interp(num_bytes, full.index.to_numpy(), full.to_numpy())
    batches = test.index.to_numpy()
    if m.cpu is not None:
        full = m.cpu[2]
        batches = np.clip(batches, full.index.min(), full.index.max())
        measured += np.interp(batches, full.index.to_numpy(), full.to_numpy())
    else:
        measured += [model.cpu_s(int(b), int(b)) for b in batches]
    predicted = [layers * model.layer_s(int(t)) + model.head_s(int(t), 0)
                 + model.cpu_s(int(b), int(t)) for t, b in zip(test.index, batches, strict=True)]
    return relative_errors(predicted, measured.to_numpy())


def import_vidur(folder: str | Path, options: ImportOptions, date: str) -> Profile:
    """The profile of `options` from the Vidur data under `folder` (module docstring)."""
    spec = get_model(options.model, field="--model")
    get_gpu(options.gpu, field="--gpu")
    return build_profile(measure(folder, options, spec, _dims(spec, options.tp)), options,
                         date)


def validate_profile(profile: Profile, folder: str | Path) -> tuple[dict, dict]:
    """Held-out errors of a Vidur-imported `profile` on the points its own import held out
    (read again from `folder` with the seed and options in `profile.source`)."""
    source = profile.source
    if source is None:
        raise ValueError("not an imported profile")
    options = ImportOptions(profile.provenance.model.name, profile.provenance.hardware_preset
                            or "", source.tp, source.seed, source.holdout_fraction,
                            source.borrow, source.cpu_overhead)
    spec = get_model(options.model)
    return heldout_errors(profile, measure(folder, options, spec, _dims(spec, options.tp)))
