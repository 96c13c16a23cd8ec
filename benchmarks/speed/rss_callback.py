"""A Lightning callback that prints the process's current and peak resident memory by phase of a
fit (used by ``benchmarks.speed.memory_phases fit``)."""

from __future__ import annotations

import resource

import lightning as L

REPORTED_BATCHES = (0, 1, 5, 19, 99)


def rss_mb() -> tuple[float, float]:
    """(current, peak) resident set size of this process in MiB (Linux: reads /proc/self/statm)."""
    pages = int(open("/proc/self/statm").read().split()[1])
    return pages * resource.getpagesize() / 2**20, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class PrintRSS(L.Callback):
    """Prints RSS at setup, after the sanity check, after the first epoch's batches 0, 1, 5, 19, 99,
    after every validation and after the test."""

    def _print(self, phase: str) -> None:
        now, peak = rss_mb()
        print(f"RSS {phase:24s} current {now:6.0f} MB  peak {peak:6.0f} MB", flush=True)

    def setup(self, trainer, pl_module, stage):  # noqa: D102
        self._print(f"setup ({stage})")

    def on_sanity_check_end(self, trainer, pl_module):  # noqa: D102
        self._print("after the sanity check")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):  # noqa: D102
        if trainer.current_epoch == 0 and batch_idx in REPORTED_BATCHES:
            self._print(f"train batch {batch_idx}")

    def on_validation_end(self, trainer, pl_module):  # noqa: D102
        if not trainer.sanity_checking:
            self._print(f"validation, epoch {trainer.current_epoch}")

    def on_test_end(self, trainer, pl_module):  # noqa: D102
        self._print("test")
