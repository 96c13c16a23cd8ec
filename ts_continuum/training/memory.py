"""A training callback that keeps a long CPU run's resident memory closer to what it uses.

With batches of ever new shapes (PhysioNet's stays packed per batch) glibc's heap fragments: on the
wide PhysioNet model the memory in use between epochs stayed at about 0.4 GB while the heap's free
part grew epoch after epoch. Handing the free pages back every so many steps lowers the peak (one
epoch: 2.50 to 2.08 GB), though not for good: the heap's extent still grows and a training step
touches much of it again (16 epochs: 4.24 GB; benchmarks/results/2026-12-06-physionet-memory).
Where the process does not use glibc's malloc the callback does nothing.
"""

from __future__ import annotations

import lightning as L

from ts_continuum import allocator


class ReleaseFreedMemory(L.Callback):
    """Calls :func:`ts_continuum.allocator.release_freed_memory` when training starts (loading the
    data leaves free heap behind), every ``every_n_steps`` training batches and at the end of every
    validation and test."""

    def __init__(self, every_n_steps: int = 50):
        if isinstance(every_n_steps, bool) or not isinstance(every_n_steps, int) or every_n_steps < 1:
            raise ValueError(f"every_n_steps must be a whole number >= 1 (training batches between releases), "
                             f"got {every_n_steps!r}")
        self.every_n_steps = every_n_steps
        self.releases = 0

    def _release(self) -> None:
        if allocator.release_freed_memory():
            self.releases += 1

    def on_train_start(self, trainer, pl_module) -> None:  # noqa: D102
        self._release()

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:  # noqa: D102
        if (batch_idx + 1) % self.every_n_steps == 0:
            self._release()

    def on_validation_end(self, trainer, pl_module) -> None:  # noqa: D102
        self._release()

    def on_test_end(self, trainer, pl_module) -> None:  # noqa: D102
        self._release()
