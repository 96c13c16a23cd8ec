import ctypes, gc, resource
import lightning as L
import torch

class MI(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena","ordblks","smblks","hblks","hblkhd","usmblks","fsmblks","uordblks","fordblks","keepcost")]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MI

def cur():
    return int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize() / 2**20

def tensors_mb():
    tot = 0
    for o in gc.get_objects():
        try:
            if isinstance(o, torch.Tensor) and not o.is_meta:
                tot += o.untyped_storage().nbytes()
        except Exception:
            pass
    return tot / 2**20

class HeapProbe(L.Callback):
    def _p(self, what):
        m = libc.mallinfo2()
        print(f"HEAP {what:20s} rss {cur():6.0f} hwm {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1024:6.0f} "
              f"inuse {m.uordblks/2**20:6.0f} free {m.fordblks/2**20:6.0f} mmap {m.hblkhd/2**20:6.0f} tensors {tensors_mb():6.0f}", flush=True)
    def on_train_epoch_start(self, trainer, pl_module):
        self._p(f"train start e{trainer.current_epoch}")
    def on_validation_start(self, trainer, pl_module):
        if not trainer.sanity_checking: self._p(f"val start e{trainer.current_epoch}")
    def on_validation_end(self, trainer, pl_module):
        if trainer.sanity_checking: return
        self._p(f"val end e{trainer.current_epoch}")
        gc.collect(); libc.malloc_trim(0)
        self._p(f"trimmed e{trainer.current_epoch}")
    def on_test_end(self, trainer, pl_module):
        self._p("test end")
