"""bench/gpu_kernels.py, the prepared kernel-timing check, as far as a CPU machine allows:
`compare` prices each kind of row with the roofline (known shapes, the error sign and the
per-kind summary), skips rows that recorded an error, and `measure` refuses without a GPU."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from prefixsim.costmodel.roofline import Roofline
from prefixsim.presets import get_gpu, get_model

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "gpu_kernels.py"


def _module():
    spec = importlib.util.spec_from_file_location("gpu_kernels", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_shapes_written_out_are_the_presets_per_gpu_shapes():
    """`measure` needs torch alone, so it writes the shapes out: they must be the ones the
    roofline prices at compare time."""
    for key, shape in _module().SHAPES.items():
        name, tp = key.split("@")
        dims = Roofline(get_model(name), get_gpu("h200"), int(tp)).dims
        assert (shape["heads"], shape["kv_heads"], shape["head_dim"], shape["hidden"]) == (
            dims.num_heads, dims.num_kv_heads, dims.head_dim, dims.hidden_size), key
        assert shape["q_out"] == dims.num_heads * dims.head_dim, key
        assert shape.get("inter", shape.get("expert_inter")) == dims.intermediate_size, key
        assert shape.get("experts") == dims.num_experts, key


def test_compare_prices_every_kind(tmp_path, capsys):
    module = _module()
    ops = Roofline(get_model("llama-3.1-8b"), get_gpu("h200"), 1).ops
    gemm_s = ops.gemm_s(64, 4096, 4096)
    rows = [
        {"kind": "gemm", "model": "llama-3.1-8b@1", "backend": "bf16-linear", "matrix": "o",
         "tokens": 64, "in_features": 4096, "out_features": 4096, "time_s": gemm_s / 0.8},
        {"kind": "gemm", "model": "llama-3.1-8b@1", "backend": "fp8-scaled-mm",
         "matrix": "o", "tokens": 64, "in_features": 4096, "out_features": 4096,
         "error": "RuntimeError: no fp8 here"},
        {"kind": "prefill_attention", "model": "llama-3.1-8b@1", "backend": "sdpa-flash",
         "new": 2048, "cached": 0, "time_s": 1e-3},
        {"kind": "decode_attention", "model": "llama-2-7b@1", "backend": "flash-varlen",
         "batch": 8, "context": 2048, "time_s": 1e-4},
        {"kind": "grouped_gemm", "model": "mixtral-8x7b@2", "backend": "bf16-grouped-mm",
         "matrix": "down", "tokens": 16, "routed": 32, "groups": 8, "in_features": 7168,
         "out_features": 4096, "time_s": 1e-3},
        {"kind": "hbm_copy", "model": "-", "backend": "copy_", "bytes_moved": 2 * 2**30,
         "time_s": 2 * 2**30 / 4.3e12},
    ]
    path = tmp_path / "k.json"
    path.write_text(json.dumps({"device_name": "test", "torch_version": "-", "date": "-",
                                "rows": rows}))
    module.compare(path, "h200")
    out = capsys.readouterr().out
    assert "hbm copy: 4.30 TB/s" in out
    gemm_line = next(line for line in out.splitlines() if "bf16-linear" in line
                     and "measured" in line)
    assert gemm_line.rstrip().endswith("-20.0%")  # predicted = 0.8 x measured
    assert "no fp8" not in out and "fp8-scaled-mm" not in out
    for kind in ("prefill_attention", "decode_attention", "grouped_gemm"):
        assert any(line.strip().startswith(kind) and "n=1" in line
                   for line in out.splitlines()), kind
    decode = module.predicted_s(rows[3], "h200")
    mha = Roofline(get_model("llama-2-7b"), get_gpu("h200"), 1).ops
    assert decode == pytest.approx(mha.attention_floor_s(False) + mha.decode_attention_fixed_s(8)
                                   + mha.decode_attention_s_per_context_token() * 8 * 2048)


@pytest.mark.heavy  # torch: .ci/run's second step
def test_measure_without_cuda_exits_2(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is present: the refusal is not reached")
    done = subprocess.run([sys.executable, str(SCRIPT), "measure", "-o",
                           str(tmp_path / "k.json")], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 2
    assert "no CUDA GPU" in done.stderr and not (tmp_path / "k.json").exists()


@pytest.mark.parametrize(("text", "named"), [
    (None, "cannot read it"),
    ("{not json", "not JSON"),
    ('{"device_name": "x", "torch_version": "-", "date": "-"}', "field rows: missing"),
    ('{"rows": []}', "field device_name: missing"),
    ('{"device_name": "x", "torch_version": "-", "date": "-", "rows": [{"kind": "gemm", '
     '"model": "llama-3.1-8b@1", "backend": "b", "tokens": 4, "in_features": 8, '
     '"time_s": 1e-3}]}', "rows[0].out_features: None is not a number"),
    ('{"device_name": "x", "torch_version": "-", "date": "-", "rows": [{"kind": "gemm", '
     '"model": "llama-3.1-8b", "backend": "b", "time_s": 1e-3}]}', "rows[0].model"),
])
def test_compare_refuses_a_bad_file_in_one_line(tmp_path, text, named):
    path = tmp_path / "k.json"
    if text is not None:
        path.write_text(text)
    done = subprocess.run([sys.executable, str(SCRIPT), "compare", str(path)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2 and named in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and str(path) in done.stderr
    assert done.stdout == ""
