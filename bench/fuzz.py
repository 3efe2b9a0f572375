"""A fuzz campaign against the command line (docs/input-rules.md I1, I2, I4, I6, I7, I14).

For a stated time (--seconds) it mutates seed inputs (a Mooncake JSONL trace, its Parquet
copy, an Azure CSV, a run config, a pricing file, a sweep spec and a finished sweep folder)
and runs the command that reads each, every case in a forked child (the package imported
once) with a memory cap (--memory-mb) and a time limit (--timeout). It counts:

  traceback  a Python traceback on stderr, a MemoryError, a child killed by a signal, or an
             exit code other than 0 and 2; or an exit 2 that is not one `prefixsim: error:`
             line
  hang       a case still running at --timeout
  silent     exit 0 on a mutation that is invalid by construction (a length as a string or
             a boolean, NaN, a negative count, a session id that is a list, ...)

and prints the counts per target and the first examples of each failure (kept under
--keep). Exit status 1 when any count is not 0.

    python bench/fuzz.py --seconds 150
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import resource
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "traces" / "demo_chat.jsonl"

HOSTILE_VALUES = ['"10"', "true", "false", "-5", "NaN", "Infinity", "-Infinity", "1e400",
                  "1.5", "[]", "{}", '["a", "b"]', "null", "18446744073709551616", '""',
                  '"\\u0000"', "1e308"]
# invalid for any numeric setting; INT_ONLY are invalid where an integer belongs
HOSTILE_YAML = [".nan", "-.inf", "true", "false", "'10'", "-1", "[]", "{}", "''",
                "!!binary aGk="]
INT_ONLY = ["1.5", "1000000000000000000000000000000"]
INT_KEYS = ("capacity_tokens", "min_cacheable_tokens")


@dataclass
class Case:
    target: str
    args: list[str]
    must_refuse: bool
    files: dict[str, bytes]  # name -> content, written into the case folder first
    note: str


# --------------------------------------------------------------------------- mutations
def flip_bytes(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        if out:
            out[rng.randrange(len(out))] = rng.randrange(256)
    return bytes(out)


def random_edit(data: bytes, rng: random.Random) -> bytes:
    kind = rng.choice(["flip", "truncate", "insert", "duplicate", "delete", "nul"])
    if kind == "flip" or not data:
        return flip_bytes(data, rng)
    cut = rng.randrange(len(data))
    if kind == "truncate":
        return data[:cut]
    if kind == "insert":
        return data[:cut] + os.urandom(rng.randint(1, 64)) + data[cut:]
    if kind == "duplicate":
        end = min(len(data), cut + rng.randint(1, 4096))
        return data[:end] + data[cut:end] * rng.randint(1, 50) + data[end:]
    if kind == "nul":
        return data[:cut] + b"\x00" + data[cut:]
    return data[:cut] + data[cut + rng.randint(1, 256):]


def hostile_json_line(line: str, rng: random.Random) -> str:
    """One field of a Mooncake line given a value no reader may accept."""
    obj = json.loads(line)
    key = rng.choice(["timestamp", "input_length", "output_length", "hash_ids", "session_id"])
    value = rng.choice(HOSTILE_VALUES)
    if key == "session_id":
        value = rng.choice(['["a", "b"]', "{}", "1.5", "true"])
    elif key == "hash_ids":
        value = rng.choice(['"1,2"', "[true]", "[1.5]", "[18446744073709551616]", "{}", "7"])
    elif value in ("null", "1e308") or (key == "timestamp" and value == "1.5"):
        value = "-5"
    obj[key] = "@@"
    return json.dumps(obj).replace('"@@"', value)


# --------------------------------------------------------------------------- the seeds
def seeds(work: Path) -> dict[str, bytes]:
    """Seed inputs, plus a finished sweep folder under work/sweep (made once)."""
    from prefixsim.cli import app

    lines = DEMO.read_text().splitlines()[:60]
    trace = ("\n".join(lines) + "\n").encode()
    (work / "seed.jsonl").write_bytes(trace)
    run_cli(app, ["trace", "convert", str(work / "seed.jsonl"), str(work / "seed.parquet")])
    csv = ["TIMESTAMP,ContextTokens,GeneratedTokens"] + [
        f"2023-11-16 18:15:{i:02d}.{i:07d},{100 + 37 * i},{5 + i}" for i in range(40)]
    spec = {"name": "f", "base": {"trace": {"path": str(work / "seed.jsonl")},
                                  "cache_only": True},
            "grid": {"cache.capacity_tokens": [3000, 9000]}}
    (work / "spec.yaml").write_text(json.dumps(spec))
    run_cli(app, ["sweep", str(work / "spec.yaml"), "-o", str(work / "sweep"), "-j", "1",
                  "--quiet"])
    return {
        "trace": trace,
        "parquet": (work / "seed.parquet").read_bytes(),
        "csv": ("\n".join(csv) + "\n").encode(),
        "config": b"cache:\n  policy: lru\n  capacity_tokens: 20000\n  ttl_s: 300\n"
                  b"engine:\n  mode: cache_only\n",
        "pricing": b"input_usd_per_mtok: 3\noutput_usd_per_mtok: 15\n"
                   b"cache_read_usd_per_mtok: 0.3\ncache_write_usd_per_mtok: 3.75\n"
                   b"cache_write_1h_usd_per_mtok: 6\nmin_cacheable_tokens: 1024\n",
        "spec": (work / "spec.yaml").read_bytes(),
    }


def make_case(target: str, seed: dict[str, bytes], rng: random.Random) -> Case:
    out = "OUT"
    if target == "trace":
        hostile = rng.random() < 0.5
        if hostile:
            lines = seed["trace"].decode().splitlines()
            at = rng.randrange(len(lines))
            lines[at] = hostile_json_line(lines[at], rng)
            data = ("\n".join(lines) + "\n").encode()
        else:
            data = random_edit(seed["trace"], rng)
        command = rng.choice([["trace", "inspect", "t.jsonl", "--trace-format", "mooncake"],
                              ["run", "--trace", "t.jsonl", "--cache-only", "-o", out]])
        return Case(target, command, hostile, {"t.jsonl": data}, "hostile field" if hostile
                    else "random edit")
    if target == "parquet":
        return Case(target, ["trace", "inspect", "t.parquet"], False,
                    {"t.parquet": random_edit(seed["parquet"], rng)}, "random edit")
    if target == "csv":
        lines = seed["csv"].decode().splitlines()
        hostile = rng.random() < 0.5
        if hostile:
            at = rng.randrange(1, len(lines))
            cells = lines[at].split(",")
            cells[rng.choice([1, 2])] = rng.choice(["-5", "1.5", "abc", "nan", "inf", ""])
            lines[at] = ",".join(cells)
            data = ("\n".join(lines) + "\n").encode()
        else:
            data = random_edit(seed["csv"], rng)
        return Case(target, ["run", "--trace", "t.csv", "--trace-format", "azure",
                             "--cache-only", "-o", out], hostile, {"t.csv": data},
                    "hostile cell" if hostile else "random edit")
    if target in ("config", "pricing"):
        text = seed[target].decode()
        hostile = rng.random() < 0.5
        if hostile:
            lines = text.splitlines()
            numeric = [i for i, line in enumerate(lines) if line.rstrip()[-1:].isdigit()]
            at = rng.choice(numeric)
            key = lines[at].split(":")[0]
            extra = INT_ONLY if key.strip() in INT_KEYS else []
            lines[at] = f"{key}: {rng.choice(HOSTILE_YAML + extra)}"
            data = ("\n".join(lines) + "\n").encode()
        else:
            data = random_edit(seed[target], rng)
        if target == "config":
            args = ["run", "--config", "c.yaml", "--trace", str(DEMO), "--cache-only", "-o", out]
            name = "c.yaml"
        else:
            args = ["run", "--trace", str(DEMO), "--cache-only", "--pricing", "p.yaml",
                    "-o", out]
            name = "p.yaml"
        return Case(target, args, hostile, {name: data},
                    "hostile value" if hostile else "random edit")
    if target == "spec":
        data = random_edit(seed["spec"], rng)
        return Case(target, ["sweep", "s.yaml", "--dry-run"], False, {"s.yaml": data},
                    "random edit")
    # a damaged sweep folder: report it, or resume it
    return Case("folder", [rng.choice(["report", "resume"])], False, {}, "damaged folder")


def damage_folder(folder: Path, rng: random.Random) -> str:
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    victim = rng.choice(files)
    how = rng.choice(["truncate", "delete", "garbage", "flip"])
    if how == "delete":
        victim.unlink()
    elif how == "truncate":
        victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    elif how == "garbage":
        victim.write_bytes(os.urandom(64))
    else:
        victim.write_bytes(flip_bytes(victim.read_bytes(), rng))
    return f"{how} {victim.relative_to(folder)}"


# --------------------------------------------------------------------------- running
def run_cli(app: object, args: list[str]) -> int:
    """`prefixsim ARGS` in this process; its exit code."""
    try:
        app.main(args=args, prog_name="prefixsim", standalone_mode=True)  # type: ignore[attr-defined]
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    return 0


def run_forked(app: object, args: list[str], folder: Path, timeout_s: float,
               memory_mb: int) -> tuple[str, int, str]:
    """('exit'|'signal'|'hang', code, stderr) of `prefixsim ARGS` in a forked child."""
    err_path = folder / ".stderr"
    pid = os.fork()
    if pid == 0:  # the child: cap memory, send output to files, run, exit
        try:
            resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))
            os.chdir(folder)
            with open(err_path, "wb") as err, open(os.devnull, "wb") as null:
                os.dup2(null.fileno(), 1)
                os.dup2(err.fileno(), 2)
            sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb"), write_through=True)
            sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb"), write_through=True)
            code = run_cli(app, args)
        except BaseException:  # noqa: BLE001 - reported as a traceback by the parent
            import traceback
            traceback.print_exc()
            code = 99
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)
    deadline = time.monotonic() + timeout_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "hang", -1, _read(err_path)
        time.sleep(0.01)
    if os.WIFSIGNALED(status):
        return "signal", os.WTERMSIG(status), _read(err_path)
    return "exit", os.WEXITSTATUS(status), _read(err_path)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def verdict(case: Case, how: str, code: int, stderr: str) -> str:
    """ok, traceback, hang or silent."""
    if how == "hang":
        return "hang"
    if how == "signal" or "Traceback" in stderr or "MemoryError" in stderr \
            or code not in (0, 2):
        return "traceback"
    if code == 2:
        errors = [line for line in stderr.splitlines() if line.startswith("prefixsim: error:")]
        return "ok" if len(errors) == 1 else "traceback"
    return "silent" if case.must_refuse else "ok"


def campaign(seconds: float, seed: int, timeout_s: float, memory_mb: int,
             keep: Path) -> dict[str, Counter]:
    from prefixsim.cli import app

    rng = random.Random(seed)
    root = Path(tempfile.mkdtemp(prefix="prefixsim-fuzz-"))
    keep.mkdir(parents=True, exist_ok=True)
    counts: dict[str, Counter] = defaultdict(Counter)
    kept: Counter = Counter()
    try:
        base = seeds(root)
        targets = ["trace", "trace", "parquet", "csv", "config", "pricing", "spec", "folder"]
        end = time.monotonic() + seconds
        number = 0
        while time.monotonic() < end:
            number += 1
            case = make_case(rng.choice(targets), base, rng)
            folder = root / f"case-{number}"
            folder.mkdir()
            for name, data in case.files.items():
                (folder / name).write_bytes(data)
            if case.target == "folder":
                shutil.copytree(root / "sweep", folder / "sweep")
                case.note = damage_folder(folder / "sweep", rng)
                case.args = (["report", "sweep", "--quiet"] if case.args[0] == "report" else
                             ["sweep", str(root / "spec.yaml"), "-o", "sweep", "--resume",
                              "-j", "1", "--quiet"])
            how, code, stderr = run_forked(app, case.args, folder, timeout_s, memory_mb)
            result = verdict(case, how, code, stderr)
            counts[case.target][result] += 1
            counts[case.target]["cases"] += 1
            if result != "ok" and kept[result] < 20:
                kept[result] += 1
                shutil.copytree(folder, keep / f"{result}-{number}", dirs_exist_ok=True)
                (keep / f"{result}-{number}" / "CASE.txt").write_text(
                    f"{case.target} ({case.note}): prefixsim {' '.join(case.args)}\n"
                    f"{how} {code}\n{stderr[-4000:]}")
            shutil.rmtree(folder, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=120.0, help="how long to fuzz")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=30.0,
                        help="seconds a case may run before it counts as a hang")
    parser.add_argument("--memory-mb", type=int, default=2048, help="address-space cap")
    parser.add_argument("--keep", type=Path, default=Path("/tmp/prefixsim-fuzz-failures"),
                        help="where failing cases are copied")
    args = parser.parse_args()
    started = time.monotonic()
    with contextlib.redirect_stdout(io.StringIO()):
        counts = campaign(args.seconds, args.seed, args.timeout, args.memory_mb, args.keep)
    total: Counter = Counter()
    print(f"fuzz: {time.monotonic() - started:.0f} s, seed {args.seed}")
    print(f"{'target':<10}{'cases':>7}{'ok':>7}{'traceback':>11}{'hang':>6}{'silent':>8}")
    for target in sorted(counts):
        c = counts[target]
        total.update(c)
        print(f"{target:<10}{c['cases']:>7}{c['ok']:>7}{c['traceback']:>11}{c['hang']:>6}"
              f"{c['silent']:>8}")
    print(f"{'all':<10}{total['cases']:>7}{total['ok']:>7}{total['traceback']:>11}"
          f"{total['hang']:>6}{total['silent']:>8}")
    bad = total["traceback"] + total["hang"] + total["silent"]
    if bad:
        print(f"failing cases kept in {args.keep}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
