import resource
import time

import lightning as L

from heap_probe import cur, libc  # same folder: mallinfo2 and the current RSS

class HeapWatch(L.Callback):
    """Prints RSS, peak, heap in use / free / mmapped, CPU seconds at epoch points (observes only)."""
    def _p(self, what):
        m, u = libc.mallinfo2(), resource.getrusage(resource.RUSAGE_SELF)
        print(f"HEAP {what:16s} rss {cur():6.0f} hwm {u.ru_maxrss/1024:6.0f} inuse {m.uordblks/2**20:6.0f} "
              f"free {m.fordblks/2**20:6.0f} mmap {m.hblkhd/2**20:6.0f} user {u.ru_utime:7.1f} sys {u.ru_stime:6.1f} "
              f"wall {time.perf_counter():9.1f}", flush=True)
    def on_train_epoch_start(self, trainer, pl_module):
        self._p(f"train e{trainer.current_epoch}")
    def on_validation_start(self, trainer, pl_module):
        if not trainer.sanity_checking: self._p(f"val e{trainer.current_epoch}")
    def on_validation_end(self, trainer, pl_module):
        if not trainer.sanity_checking: self._p(f"val end e{trainer.current_epoch}")
    def on_test_end(self, trainer, pl_module):
        self._p("test end")
