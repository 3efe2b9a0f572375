"""Build traces/demo_chat.jsonl: a small synthetic multi-turn chat trace (Mooncake JSONL).

Deterministic (seeded). Sessions pick one of a few shared system prompts (Zipf popularity),
and each turn's prompt is the previous prompt + the answer + a new user message, so later
turns reuse earlier turns' pages. Run: python traces/make_demo.py
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

BLOCK = 512


DEFAULT_PATH = Path(__file__).with_name("demo_chat.jsonl")


def main(path: Path = DEFAULT_PATH, seed: int = 7) -> None:
    rng = np.random.default_rng(seed)
    ids: dict[tuple[int, str], int] = {}

    def chain(parent: int, content: str) -> int:
        return ids.setdefault((parent, content), len(ids))

    system_lengths = [1800, 3100, 700, 5200]
    popularity = 1.0 / np.arange(1, len(system_lengths) + 1) ** 1.1
    popularity /= popularity.sum()
    rows = []
    session_start = 0.0
    for session in range(60):
        session_start += rng.exponential(8.0)
        system = int(rng.choice(len(system_lengths), p=popularity))
        tokens = [f"sys{system}:{i}" for i in range(system_lengths[system])]
        now = session_start
        for _turn in range(int(rng.integers(1, 9))):
            user = int(rng.lognormal(5.5, 1.0)) + 20
            tokens += [f"s{session}u{len(tokens)}:{i}" for i in range(user)]
            hash_ids, parent = [], -1
            for start in range(0, len(tokens), BLOCK):
                block = tokens[start:start + BLOCK]
                parent = chain(parent, f"{block[0]}|{block[-1]}|{len(block)}")
                hash_ids.append(parent)
            output = int(min(rng.lognormal(5.3, 0.7), 2000)) + 1
            rows.append({"timestamp": int(now * 1000), "input_length": len(tokens),
                         "output_length": output, "hash_ids": hash_ids,
                         "session_id": f"s{session}"})
            tokens += [f"s{session}a{len(tokens)}:{i}" for i in range(output)]
            now += rng.exponential(25.0) + output / 40.0
    rows.sort(key=lambda row: row["timestamp"])
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    print(f"wrote {len(rows)} requests to {path}")


if __name__ == "__main__":
    main()
