"""Callback: RSS, glibc malloc in use / free (mallinfo2, all arenas), and RssAnon/RssFile at training
batches, validation and test ends."""

import ctypes, resource
import lightning.pytorch as pl

libc = ctypes.CDLL("libc.so.6")


class MI2(ctypes.Structure):
    _fields_ = [
        (n, ctypes.c_size_t)
        for n in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


libc.mallinfo2.restype = MI2


def info():
    m = libc.mallinfo2()
    rss = int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
    st = dict(l.split(":", 1) for l in open("/proc/self/status"))
    global anon_file
    anon_file = (
        int(st["RssAnon"].split()[0]) / 1024,
        int(st["RssFile"].split()[0]) / 1024,
        int(st["RssShmem"].split()[0]) / 1024,
    )
    return (
        rss,
        (m.uordblks + m.hblkhd) / 2**20,
        m.fordblks / 2**20,
        m.arena / 2**20,
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    )


class MallinfoProbe(pl.Callback):
    def _p(self, where):
        rss, used, free, arena, peak = info()
        print(
            f"MI {where:24s} rss {rss:6.0f} malloc-used {used:6.0f} malloc-free {free:6.0f} arena {arena:6.0f} peak {peak:6.0f} anon/file/shmem {anon_file}",
            flush=True,
        )

    def on_train_batch_start(self, t, m, b, i):
        if i % 5 == 0:
            self._p(f"train-start e{t.current_epoch} b{i}")

    def on_train_batch_end(self, t, m, o, b, i):
        if i % 5 == 0:
            self._p(f"train-end e{t.current_epoch} b{i}")

    def on_validation_end(self, t, m):
        self._p(f"val end e{t.current_epoch}")

    def on_test_end(self, t, m):
        self._p("test end")
