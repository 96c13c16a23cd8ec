import ctypes, os, resource
import lightning.pytorch as pl
libc = ctypes.CDLL("libc.so.6")
N = int(os.environ.get("TRIM_EVERY", "0"))
class TrimEvery(pl.Callback):
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if N and (batch_idx + 1) % N == 0:
            libc.malloc_trim(0)
    def on_validation_end(self, trainer, pl_module):
        if N: libc.malloc_trim(0)
        print(f"PEAK after validation {trainer.current_epoch}: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024:.0f} MB", flush=True)
