"""`prefixsim trace inspect/convert/generate` end to end on small files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from prefixsim.cli import app
from prefixsim.report.trace_plots import popularity, reuse_times_s, top_share
from prefixsim.trace import ReadOptions, Request, read_trace, readers

DEMO = Path(__file__).parents[2] / "traces" / "demo_chat.jsonl"


def invoke(*args: str):
    return CliRunner().invoke(app, [str(a) for a in args])


def _kv_folder(folder: Path) -> Path:
    folder.mkdir()
    for name in ("a", "b"):
        (folder / f"trace_{name}.json").write_text(json.dumps({
            "id": name, "block_size": 64, "hash_id_scope": "local", "requests": [
                {"t": 0.0, "type": "n", "in": 300, "out": 5, "hash_ids": [1, 2, 3, 4]},
                {"t": 4.0, "type": "subagent", "agent_id": "x", "requests": [
                    {"t": 1.0, "type": "n", "in": 70, "out": 2, "hash_ids": [1]}]},
                {"t": 9.0, "type": "n", "in": 700, "out": 5,
                 "hash_ids": list(range(1, 11))},
            ]}))
    return folder


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet"])
def test_convert_round_trip_keeps_requests(tmp_path, suffix):
    """kv-cache-tester folder -> 128-token pages -> file -> read back: same requests."""
    folder = _kv_folder(tmp_path / "kv")
    out = tmp_path / f"out{suffix}"
    result = invoke("trace", "convert", folder, out, "--page-size", "128")
    assert result.exit_code == 0, result.output
    original = read_trace(folder).requests
    back = read_trace(out).requests
    assert len(back) == len(original) == 6
    for a, b in zip(original, back, strict=True):
        assert (b.arrival_s, b.input_tokens, b.output_tokens, b.session_id) == pytest.approx(
            (a.arrival_s, a.input_tokens, a.output_tokens, a.session_id))
        assert b.page_size_tokens == 128
        assert b.page_ids == a.page_ids[1::2] + ((a.page_ids[-1],) if a.num_pages % 2 else ())
    assert {r.session_id for r in back} == {"a", "a/x", "b", "b/x"}


def test_convert_refuses_finer_pages(tmp_path):
    result = invoke("trace", "convert", DEMO, tmp_path / "x.jsonl", "--page-size", "256")
    assert result.exit_code == 2
    assert "finer" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "x.jsonl").exists()


def test_inspect_folder_of_traces_and_plots(tmp_path):
    folder = tmp_path / "many"
    folder.mkdir()
    (folder / "README.md").write_text("# not a trace\n")
    (folder / "demo.jsonl").write_bytes(DEMO.read_bytes())
    _kv_folder(folder / "agents")
    result = invoke("trace", "inspect", folder, "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    counts = {Path(t["path"]).name: t["requests"] for t in payload["traces"]}
    assert counts == {"demo.jsonl": 264, "agents": 6}
    plots = tmp_path / "plots"
    result = invoke("trace", "inspect", DEMO, "--plot", plots)
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in plots.iterdir())
    assert names == sorted(["arrival_rate.png", "lengths.png", "reuse_time_cdf.png",
                            "popularity_skew.png", "turns_per_session.png",
                            "hit_rate_vs_ttl.png", "hit_rate_vs_capacity.png"])
    assert all((plots / n).stat().st_size > 5000 for n in names)
    # `--plot x.png` (as `curve --plot` takes) would make a folder named x.png: refused
    result = invoke("trace", "inspect", DEMO, "--plot", tmp_path / "figure.png")
    assert result.exit_code == 2 and not (tmp_path / "figure.png").exists()
    assert result.output.strip().splitlines() == [
        f"prefixsim: error: --plot: a folder for the figures (one PNG each), got the file "
        f"name '{tmp_path / 'figure.png'}' (e.g. --plot {tmp_path / 'figure'})"]


def test_inspect_labels_synthetic_prefix_model(tmp_path):
    path = tmp_path / "azure.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                    "2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.99,396,109\n")
    result = invoke("trace", "inspect", path, "--json", "--prefix-model", "shared:64")
    stats = json.loads(result.output)
    assert "synthetic" in stats["prefix_model"]
    assert stats["unbounded_token_hit_rate"] == pytest.approx(64 / (374 + 396))


def test_read_options_max_requests_and_coarse_inspect(tmp_path):
    data = read_trace(DEMO, options=ReadOptions(max_requests=10))
    assert len(data.requests) == 10
    result = invoke("trace", "inspect", DEMO, "--json", "--page-size", "1024")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["page_size_tokens"] == 1024


def test_run_skip_bad_lines_reports_the_count(tmp_path):
    broken = Path(__file__).parents[1] / "data" / "broken" / "mooncake_wrong_type.jsonl"
    out = tmp_path / "r"
    strict = invoke("run", "--trace", broken, "--cache-only", "-o", out, "--quiet")
    assert strict.exit_code == 2 and ":2: input_length:" in strict.output
    assert not out.exists()
    result = invoke("run", "--trace", broken, "--cache-only", "--skip-bad-lines", "-o", out,
                    "--quiet")
    assert result.exit_code == 0, result.output
    assert "skipped 1 bad lines" in result.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["trace_skipped_lines"] == 1 and summary["completed"] == 1


def test_read_progress_reports_every_request(monkeypatch):
    monkeypatch.setattr(readers, "PROGRESS_EVERY", 50)
    seen: list[int] = []
    data = read_trace(DEMO, options=ReadOptions(on_progress=seen.append))
    assert seen and all(n == 50 for n in seen)
    assert sum(seen) == len(data.requests) // 50 * 50


def test_reuse_statistics_known_answer():
    """Pages 1 (used 3x), 2 (2x), 3 (1x): reuses [2, 1, 0]; the top 10% of 3 pages is one
    page holding 2 of 3 reuses. Page 1 is reused after 1 s and 2 s, page 2 after 3 s."""
    requests = [Request(0, 0.0, 20, 1, (1, 2), 16), Request(1, 1.0, 20, 1, (1, 3), 16),
                Request(2, 3.0, 20, 1, (1, 2), 16)]
    assert list(popularity(requests)) == [2, 1, 0]
    assert top_share(popularity(requests)) == pytest.approx(2 / 3)
    assert sorted(reuse_times_s(requests)) == [1.0, 2.0, 3.0]


def test_a_trace_named_as_another_format_is_refused_before_anything_is_written(tmp_path):
    """`-o trace.csv` wrote Mooncake JSON lines into a .csv; now refused in one line naming
    the .jsonl and .parquet names, nothing written; `--to jsonl` keeps the name asked for,
    and `.PARQUET` is Parquet."""
    runner = CliRunner()
    generated = runner.invoke(app, ["trace", "generate", "--preset", "chat", "--requests",
                                    "5", "-o", str(tmp_path / "g.csv")])
    assert generated.exit_code == 2
    assert generated.output == ("prefixsim: error: --output: g.csv names a csv file, but "
                                "traces are written as Mooncake JSONL or Parquet: name it "
                                "g.jsonl or g.parquet\n")
    source = Path("traces/demo_chat.jsonl")
    converted = runner.invoke(app, ["trace", "convert", str(source), str(tmp_path / "c.tsv")])
    assert converted.exit_code == 2 and "OUT: c.tsv names a tsv file" in converted.output
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    asked = runner.invoke(app, ["trace", "convert", str(source), str(tmp_path / "c.csv"),
                                "--to", "jsonl"])
    assert asked.exit_code == 0 and (tmp_path / "c.csv").read_text().startswith("{")
    upper = runner.invoke(app, ["trace", "convert", str(source), str(tmp_path / "c.PARQUET")])
    assert upper.exit_code == 0 and (tmp_path / "c.PARQUET").read_bytes()[:4] == b"PAR1"


def test_a_trace_named_as_compressed_is_refused(tmp_path):
    """`-o g.jsonl.gz` wrote plain text under a gzip name (which the readers then refuse as
    gzip); refused, naming the plain name, nothing written; `convert --to jsonl` too."""
    runner = CliRunner()
    result = runner.invoke(app, ["trace", "generate", "--preset", "chat", "--requests", "5",
                                 "-o", str(tmp_path / "g.jsonl.gz")])
    assert result.exit_code == 2
    assert result.output == ("prefixsim: error: --output: g.jsonl.gz names a compressed "
                             "file, but traces are written uncompressed, as the readers "
                             "take them: name it g.jsonl\n")
    converted = runner.invoke(app, ["trace", "convert", "traces/demo_chat.jsonl",
                                    str(tmp_path / "c.parquet.zst"), "--to", "parquet"])
    assert converted.exit_code == 2 and "OUT: c.parquet.zst names a compressed file" in \
        converted.output
    assert list(tmp_path.iterdir()) == []


def test_output_a_reader_stops_reading_ends_the_command_quietly(tmp_path):
    """`prefixsim trace inspect T | head -1`: the pipe closes before the command prints;
    it printed 'prefixsim: error: Broken pipe' (exit 2). Now nothing on stderr, exit 141
    (128 + SIGPIPE, as a shell reports it)."""
    import subprocess
    import sys

    process = subprocess.Popen([sys.executable, "-m", "prefixsim", "trace", "inspect",
                                "traces/demo_chat.jsonl"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    process.stdout.close()  # the reader leaves before the first line
    _, stderr = process.communicate(timeout=120)
    assert (process.returncode, stderr) == (141, b"")
