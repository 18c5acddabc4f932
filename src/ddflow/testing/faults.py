"""Injected faults for tests of recovery: a job hook that kills one worker's process once."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

__all__ = ["KillWorker"]


@dataclass(frozen=True)
class KillWorker:
    """A job's ``on_round`` hook that kills worker ``worker``'s process after round
    ``round``, once: the marker file it writes first says it happened (so the rerun of the
    stage, which finds the marker, runs to the end)."""

    worker: int
    round: int
    marker: str

    def __call__(self, report: Any) -> None:
        if (
            report.worker == self.worker
            and report.round == self.round
            and not os.path.exists(self.marker)
        ):
            with open(self.marker, "w") as f:
                f.write(f"worker {report.worker} killed after round {report.round}\n")
            os._exit(17)
