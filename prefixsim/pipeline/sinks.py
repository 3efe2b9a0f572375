"""Where a run's request rows go: the record sink its caller supplies (docs/architecture.md
"One run: a one-way road").

A run hands its request rows to a `RowSink` as they are made: a streamed run one chunk at a
time, a run over a trace read whole all at once. `ParquetRows` writes them to a Parquet file,
one row group a write (the CLI's `requests.parquet`); `FrameRows` keeps them in memory; a
run given no sink keeps its rows only in its `RunResult`. A streamed run that gives up
(the trace must be read whole) calls `discard`, and the run starts again on the same sink.

Owned here: the sink protocol and these sinks. Left out: choosing paths (the CLI does), the
rows themselves (metrics/ makes the frames).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq


class RowSink(Protocol):
    """Takes a run's request rows, in order, a frame at a time."""

    @property
    def scratch_dir(self) -> Path | None:
        """A folder where the run may keep temporary files beside the rows (None: the
        system's temporary folder)."""
        ...

    def write(self, rows: pd.DataFrame) -> None:
        """Take the next rows (a frame with the run's request columns)."""
        ...

    def close(self) -> None:
        """Every row was written."""
        ...

    def discard(self) -> None:
        """Forget every row written so far (the run starts again)."""
        ...


class ParquetRows:
    """Request rows to the Parquet file `path`, one row group a write. A run with no rows
    still leaves a file: the columns of its (empty) frame."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._writer: pq.ParquetWriter | None = None
        self._empty: pd.DataFrame | None = None

    @property
    def scratch_dir(self) -> Path | None:
        return self.path.parent

    def write(self, rows: pd.DataFrame) -> None:
        if not len(rows):
            if self._empty is None:
                self._empty = rows
            return
        table = pa.Table.from_pandas(rows, preserve_index=False)
        if self._writer is None:
            self._writer = pq.ParquetWriter(self.path, table.schema)
        self._writer.write_table(table)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        elif self._empty is not None:
            self._empty.to_parquet(self.path, index=False)

    def discard(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        self._empty = None
        self.path.unlink(missing_ok=True)


class FrameRows:
    """Request rows kept in memory; `frame()` is all of them in order."""

    scratch_dir: Path | None = None

    def __init__(self) -> None:
        self._frames: list[pd.DataFrame] = []

    def write(self, rows: pd.DataFrame) -> None:
        self._frames.append(rows)

    def close(self) -> None:
        pass

    def discard(self) -> None:
        self._frames.clear()

    def frame(self) -> pd.DataFrame:
        if not self._frames:
            return pd.DataFrame()
        if len(self._frames) == 1:
            return self._frames[0]
        return pd.concat(self._frames, ignore_index=True)
