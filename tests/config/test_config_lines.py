"""Errors in YAML files name the line of the key they are about (docs/input-rules.md I1):
`key_lines`, `line_of` and `located` (prefixsim/errors.py) by hand, then run configs, sweep
specs and tune specs as a user writes them."""

import textwrap
from pathlib import Path

import yaml
from fakes import refusal

from prefixsim.config import load_config
from prefixsim.errors import InputError, key_lines, line_of, located
from prefixsim.sweep import expand, load_spec, parse_spec
from prefixsim.sweep.spec import point_lines
from prefixsim.tune.spec import load_tune_spec

DEMO = str(Path(__file__).resolve().parents[2] / "traces" / "demo_chat.jsonl")


def test_key_lines_by_hand():
    text = textwrap.dedent("""\
        name: x
        base:
          cache:
            policy: lru

            ttl_s: 5
        grid:
          cache.ttl_s: [1, 2]
        runs:
          - cache.policy: fifo
          -
            cache.policy: lru
        """)
    assert key_lines(text) == {
        "name": 1, "base": 2, "base.cache": 3, "base.cache.policy": 4, "base.cache.ttl_s": 6,
        "grid": 7, "grid.cache.ttl_s": 8, "grid.cache.ttl_s.0": 8, "grid.cache.ttl_s.1": 8,
        "runs": 9, "runs.0": 10, "runs.0.cache.policy": 10, "runs.1": 12,
        "runs.1.cache.policy": 12}
    assert key_lines("\ufeffa:\n  b: 1\n") == {"a": 1, "a.b": 2}
    assert key_lines("") == {} and key_lines("5") == {} and key_lines("a: [") == {}
    assert key_lines("[" * 5000) == {}  # too deep for the composer: no lines, no crash


def test_a_node_behind_an_alias_is_walked_once():
    text = "a: &x {k: 1}\nb: *x\nc: {d: *x}\n"
    lines = key_lines(text)
    assert lines["a.k"] == 1 and "b.k" not in lines and "c.d.k" not in lines
    assert (lines["b"], lines["c.d"]) == (2, 3)
    bomb = "a: &a [1, 1, 1, 1, 1, 1, 1, 1]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 8)}]\n"
        for i in range(8))
    assert len(key_lines(bomb)) < 100  # shared lists once each, not 8^9 paths


def test_line_of_takes_the_longest_prefix_that_has_a_line():
    lines = {"cache": 3, "cache.pool": 7, "cache.pool.ttl_s": 9}
    assert line_of(lines, "cache.pool.ttl_s") == 9
    assert line_of(lines, "cache.pool.policy") == 7
    assert line_of(lines, "cache.ttl_s") == 3
    assert line_of(lines, "trace.path") is None and line_of({}, "cache") is None
    assert line_of({"cache.pool.ttl_s": 9}, "cache.pool") is None  # never a key below


def test_located_adds_a_line_only_where_the_file_gave_the_value():
    lines = {"cache": 3, "cache.ttl_s": 4}

    def error(**where):
        return InputError("must be > 0", **{"file": "r.yaml", "field": "cache.ttl_s", **where})

    found = located(error(), "r.yaml", lines)
    assert (str(found), found.message, found.field) == (
        "r.yaml:4: cache.ttl_s: must be > 0", "must be > 0", "cache.ttl_s")
    for exc, file, elsewhere in [
            (error(line=9), "r.yaml", ()),            # a line already: kept
            (error(field=None), "r.yaml", ()),        # no field to look up
            (error(file="other.yaml"), "r.yaml", ()),  # another file's error
            (error(file=None), None, ()),             # no file at all
            (error(field="trace.path"), "r.yaml", ()),  # a key the file does not hold
            (error(), "r.yaml", ["cache.ttl_s"]),     # the flag gave this value
            (error(), "r.yaml", ["cache"]),           # ... or the section above it
            (error(field="cache"), "r.yaml", ["cache.ttl_s"])]:  # ... or a key below
        assert located(exc, file, lines) is exc or elsewhere
        assert located(exc, file, lines, elsewhere) is exc
    assert str(located(error(), "r.yaml", lines, ["cache.ttl"])) == \
        "r.yaml:4: cache.ttl_s: must be > 0"  # a key of another name, sharing a prefix


def write(path, text):
    path.write_text(textwrap.dedent(text))
    return path


def test_a_run_config_names_the_line_of_a_bad_value(tmp_path):
    config = write(tmp_path / "run.yaml", f"""\
        trace:
          path: {DEMO}
        cache_only: true
        cache:
          policy: lru
          capacity_tokens: -5
        """)
    assert refusal(lambda: load_config(config)) == \
        f"{config}:6: cache.capacity_tokens: must be >= 0, got -5"
    # a value the command line gave is not the file's: neither file nor line
    assert refusal(lambda: load_config(config, {"cache.capacity_tokens": -3})) == \
        "cache.capacity_tokens: must be >= 0, got -3"
    assert refusal(lambda: load_config(config, {"cache.capacity_tokens": 5,
                                                "cache.ttl_s": -1})) == \
        "cache.ttl_s: must be > 0, got -1"
    # an error about a section a flag set a key of: the file, no line
    section = located(InputError("bad", file=str(config), field="cache"), str(config),
                      {"cache": 4}, ["cache.ttl_s"])
    assert str(section) == f"{config}: cache: bad"
    # a key the file does not hold: the line of its section
    config = write(tmp_path / "run.yaml", f"""\
        trace:
          path: {DEMO}
        cache_only: true
        cache:
          polcy: lru
        """)
    assert refusal(lambda: load_config(config)).startswith(
        f"{config}:5: cache.polcy: unknown key")


def test_a_sweep_spec_names_the_line_of_the_base_key_the_grid_key_or_the_run(tmp_path):
    head = f"""\
        name: t
        base:
          trace:
            path: {DEMO}
          cache_only: true
        """.rstrip(" ")
    spec = write(tmp_path / "s.yaml", head + """\
          cache:
            capacity_tokens: -5
        grid:
          cache.ttl_s: [1, 2]
        """)
    assert refusal(lambda: expand(load_spec(spec), str(spec))) == (
        f"{spec}:7: cache.capacity_tokens: must be >= 0, got -5 (in the point cache.ttl_s=1)")
    spec = write(tmp_path / "s.yaml", head + """\
          cache:
            ttl_s: 5
        grid:
          cache.capacity_tokens: [100]
          cache.ttl_s:
            - 1
            - -2
        """)
    assert refusal(lambda: expand(load_spec(spec), str(spec))) == (
        f"{spec}:12: cache.ttl_s: must be > 0, got -2 (in the point cache.capacity_tokens=100, "
        "cache.ttl_s=-2)")
    spec = write(tmp_path / "s.yaml", head + """\
        runs:
          - cache.policy: lru
          - cache.ttl_s: 3
            cache.policy: nope
        """)
    assert refusal(lambda: expand(load_spec(spec), str(spec))).startswith(
        f"{spec}:9: cache.policy: unknown eviction policy 'nope'")
    # without the spec's file name (a spec given as a mapping) there is no line
    data = yaml.safe_load(spec.read_text())
    assert refusal(lambda: expand(parse_spec(data))).startswith(
        "cache.policy: unknown eviction policy 'nope'")


def test_a_sweep_specs_shape_errors_name_their_lines(tmp_path):
    spec = write(tmp_path / "s.yaml", """\
        base: {}
        grid:
          cache.ttl_s: 5
        """)
    assert refusal(lambda: load_spec(spec)) == \
        f"{spec}:3: grid.cache.ttl_s: expected a non-empty list of values"
    spec = write(tmp_path / "s.yaml", """\
        grid:
          cache.ttl_s: [1]
        rnus: []
        """)
    assert refusal(lambda: load_spec(spec)) == \
        f"{spec}:3: rnus: unknown key (valid: name, base, grid, runs)"
    spec = write(tmp_path / "s.yaml", "grid:\n  a: " + str(list(range(101))) + "\n  b: "
                 + str(list(range(100))) + "\n")
    assert refusal(lambda: expand(load_spec(spec), str(spec))).startswith(
        f"{spec}:1: grid: asks for 10,100 runs")


def test_point_lines_by_hand():
    lines = {"name": 1, "base": 2, "base.cache": 3, "base.cache.ttl_s": 4,
             "base.cache.pool": 5, "base.cache.pool.ttl_s": 6, "grid": 7,
             "grid.cache.ttl_s": 8, "grid.cache.ttl_s.0": 8, "grid.cache.ttl_s.1": 9,
             "grid.cache.pool": 10, "grid.cache.pool.0": 11, "grid.cache.pool.0.ttl_s": 12,
             "runs": 13, "runs.0": 14, "runs.0.cache.ttl_s": 14}
    assert point_lines(lines, {"cache.ttl_s": "grid.cache.ttl_s.1"}) == {
        "cache": 3, "cache.ttl_s": 9, "cache.pool": 5, "cache.pool.ttl_s": 6}
    assert point_lines(lines, {"cache.pool": "grid.cache.pool.0"}) == {
        "cache": 3, "cache.ttl_s": 4, "cache.pool": 11, "cache.pool.ttl_s": 12}
    assert point_lines(lines, {"cache.ttl_s": "runs.0.cache.ttl_s"})["cache.ttl_s"] == 14
    # a key the point sets with no line of its own still hides the base's
    assert point_lines(lines, {"cache.ttl_s": "runs.1.cache.ttl_s"}) == {
        "cache": 3, "cache.pool": 5, "cache.pool.ttl_s": 6}
    # `grid.cache.ttl_s.1` is not inside `grid.cache.ttl_s.10`'s value
    assert point_lines({"grid.a.1": 3, "grid.a.10": 9}, {"a": "grid.a.1"}) == {"a": 3}


def test_a_tune_spec_names_the_line_of_a_base_key(tmp_path):
    spec = write(tmp_path / "t.yaml", f"""\
        base:
          trace:
            path: {DEMO}
          cache_only: true
          cache:
            policy: lru
            capacity_tokens: -5
        space:
          cache.ttl_s: [1, 2]
        objectives: cache_token_hit_rate
        trials: 2
        """)
    assert refusal(lambda: load_tune_spec(spec)) == \
        f"{spec}:7: base.cache.capacity_tokens: must be >= 0, got -5"


def test_presets_pricing_and_generator_files_name_their_lines(tmp_path):
    from prefixsim.metrics.pricing import load_pricing
    from prefixsim.presets.custom import load_custom_presets
    from prefixsim.trace.generate.preset import load_preset

    presets = write(tmp_path / "g.yaml", """\
        gpus:
          - name: g
            hbm_bytes: 80e9
        """)
    assert refusal(lambda: load_custom_presets(presets)) == \
        f"{presets}:3: gpus.0.hbm_bytes: unknown key"
    prices = write(tmp_path / "p.yaml", """\
        input_usd_per_mtok: 3
        output_usd_per_mtok: 15
        cache_read_usd_per_mtok: 0.3
        cache_write_usd_per_mtok: -1
        cache_write_1h_usd_per_mtok: 6
        """)
    assert refusal(lambda: load_pricing(str(prices))) == (
        f"{prices}:4: cache_write_usd_per_mtok: must be a finite number in [0, 1e+06], got -1")
    chat = (Path(__file__).resolve().parents[2] / "traces" / "chat.yaml").read_text()
    preset = tmp_path / "c.yaml"
    preset.write_text(chat.replace("value: 700", "value: -700"))
    line = next(i for i, text in enumerate(preset.read_text().splitlines(), 1)
                if "value: -700" in text)
    assert refusal(lambda: load_preset(str(preset))).startswith(f"{preset}:{line}: workloads.")


def test_lines_are_worked_out_only_when_asked_for(tmp_path, monkeypatch):
    from prefixsim import errors

    composed = []
    real = errors.key_lines
    monkeypatch.setattr(errors, "key_lines", lambda text: composed.append(text) or real(text))
    path = write(tmp_path / "r.yaml", "cache:\n  ttl_s: 5\n")
    data, lines = errors.read_yaml_lines(path)
    assert data == {"cache": {"ttl_s": 5}} and composed == []
    assert dict(lines) == {"cache": 1, "cache.ttl_s": 2} and len(lines) == 2
    assert lines["cache.ttl_s"] == 2 and len(composed) == 1  # composed once
