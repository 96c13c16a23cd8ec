import ctypes, resource
import lightning.pytorch as pl
libc = ctypes.CDLL("libc.so.6")
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
class TrimProbe(pl.Callback):
    def _trim(self, what):
        import os; before = rss(); os.environ.get("TRIM", "1") == "1" and libc.malloc_trim(0); after = rss()
        print(f"TRIM {what:28s} {before:6.0f} -> {after:6.0f} MB (peak {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024:.0f})", flush=True)
    def on_sanity_check_end(self, trainer, pl_module): self._trim("after sanity")
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if batch_idx in (0, 1, 5, 19, 40): self._trim(f"train batch {batch_idx}")
    def on_validation_end(self, trainer, pl_module): self._trim(f"validation epoch {trainer.current_epoch}")
import os
if os.environ.get("TILE"):
    import ts_continuum.attention.reference as _r
    _r.TILE_ELEMENTS = int(os.environ["TILE"])
    print("TILE_ELEMENTS", _r.TILE_ELEMENTS, flush=True)
