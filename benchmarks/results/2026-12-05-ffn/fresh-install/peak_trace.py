import resource
import lightning.pytorch as pl
def peak(): return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
def cur(): return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
class PeakTrace(pl.Callback):
    last = 0.0
    def _p(self, where):
        p = peak()
        if p > self.last + 3:
            print(f"PEAK {where:36s} peak {p:6.0f} current {cur():6.0f}", flush=True)
            self.last = p
    def on_train_batch_end(self, t, m, o, b, i): self._p(f"train e{t.current_epoch} b{i}")
    def on_validation_batch_end(self, t, m, o, b, i, d=0): self._p(f"val e{t.current_epoch} b{i} sanity={t.sanity_checking}")
    def on_test_batch_end(self, t, m, o, b, i, d=0): self._p(f"test b{i}")
    def on_validation_end(self, t, m): self._p("val end")
    def on_test_end(self, t, m): self._p("test end")
