"""The C allocator setting of the entry points (ts_continuum/allocator.py): what it sets, when it
stays out of the way, that it removes the page faults it is for, and that no result changes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from forecaster_data import TINY, long_frame

from ts_continuum import allocator

ROOT = Path(__file__).resolve().parents[1]
ON_GLIBC = allocator.glibc_mallopt()[0] is not None


class FakeMallopt:
    """Records mallopt calls; refuses mmap thresholds above ``largest``."""

    def __init__(self, largest: int | None = None):
        self.calls: list[tuple[int, int]] = []
        self.largest = largest

    def __call__(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return int(not (param == allocator.M_MMAP_THRESHOLD and self.largest is not None and value > self.largest))


def never_probed():
    raise AssertionError("the C library must not be touched")


def test_both_thresholds_are_raised():
    mallopt = FakeMallopt()
    outcome = allocator.configure(None, {}, lambda: (mallopt, ""))
    assert mallopt.calls == [(allocator.M_MMAP_THRESHOLD, allocator.THRESHOLD),
                             (allocator.M_TRIM_THRESHOLD, allocator.THRESHOLD)]
    assert "keeps freed memory" in outcome


def test_a_glibc_that_refuses_a_large_mmap_threshold_gets_the_largest_it_promises():
    mallopt = FakeMallopt(largest=allocator.FALLBACK_MMAP_THRESHOLD)
    outcome = allocator.configure("1", {}, lambda: (mallopt, ""))
    assert (allocator.M_MMAP_THRESHOLD, allocator.FALLBACK_MMAP_THRESHOLD) in mallopt.calls
    assert "mmap threshold 32 MiB" in outcome


@pytest.mark.parametrize("value", ["0", "false", "off", " No "])
def test_the_environment_variable_turns_it_off(value):
    outcome = allocator.configure(value, {}, never_probed)
    assert allocator.ENV in outcome and "left as it is" in outcome


def test_a_misspelt_value_is_refused_with_the_accepted_ones():
    with pytest.raises(ValueError, match=r"TS_CONTINUUM_ALLOCATOR='maybe' is not understood: set it to 0 .* or to 1"):
        allocator.configure("maybe", {}, never_probed)


@pytest.mark.parametrize("environ", [{"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"},
                                     {"MALLOC_MMAP_THRESHOLD_": "65536"}])
def test_malloc_settings_given_in_the_environment_are_kept(environ):
    outcome = allocator.configure(None, environ, never_probed)
    assert "left as it is" in outcome and next(iter(environ)) in outcome


def test_elsewhere_than_glibc_nothing_is_set(monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    mallopt, why = allocator.glibc_mallopt()
    assert mallopt is None and "darwin" in why
    assert (allocator.configure(None, {}, allocator.glibc_mallopt)
            == "malloc left as it is: the C library is not glibc (darwin)")


def test_it_is_applied_once_per_process(monkeypatch):
    probes = []
    monkeypatch.setattr(allocator, "_outcome", None)
    monkeypatch.setattr(allocator, "glibc_mallopt", lambda: probes.append(1) or (None, "test"))
    first = allocator.keep_freed_memory()
    assert allocator.keep_freed_memory() == first == allocator.describe()
    assert probes == [1]


def test_the_entry_points_apply_it(monkeypatch, tmp_path):
    from benchmarks import run
    from benchmarks.physionet import run as physionet_run
    from ts_continuum import Forecaster
    from ts_continuum.training import cli

    calls = []
    monkeypatch.setattr(sys, "argv", ["ts-continuum"])
    monkeypatch.setattr(allocator, "keep_freed_memory", lambda: calls.append(1) or "")
    with pytest.raises(SystemExit):
        cli.main(["fit", "--no-such-option"])
    run.main(["--profile", "quick", "--out", str(tmp_path), "--dry-run"])
    grid = tmp_path / "physionet.yaml"
    grid.write_text(yaml.safe_dump({"name": "tiny", "out": str(tmp_path / "physionet"), "defaults": {}, "blocks": [
        {"name": "floor", "model": "last", "attention": "none", "pos_encoding": "none", "history_keep": 1.0,
         "switch": "none", "seed": 0}]}))
    physionet_run.main(["--grid", str(grid), "--dry-run"])
    Forecaster(**TINY, limit_train_batches=1).fit(long_frame())  # the fit loop every training route goes through
    assert calls == [1, 1, 1, 1]


def test_a_misspelt_value_stops_the_command_in_one_line(monkeypatch, capsys):
    from ts_continuum.training import cli

    monkeypatch.setattr(allocator, "_outcome", None)
    monkeypatch.setenv(allocator.ENV, "maybe")
    with pytest.raises(SystemExit) as info:
        cli.main(["fit", "--help"])
    assert str(info.value).startswith("ts-continuum: error: TS_CONTINUUM_ALLOCATOR='maybe' is not understood")


# Run in a subprocess: the setting cannot be undone in the process that made it.
PROBE = """
import hashlib, json, resource, sys, torch
from ts_continuum import allocator, continuous_attention
from ts_continuum.models import PatchTST
outcome = allocator.keep_freed_memory()

def faults_per_block(mb=48, repeats=8):  # above glibc's largest default mmap threshold (32 MiB)
    for _ in range(2):  # the first blocks grow the heap; later ones find room in it
        torch.empty(mb << 18).fill_(1.0)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(repeats):
        torch.empty(mb << 18).fill_(1.0)
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / repeats

digest = hashlib.sha256()
torch.manual_seed(0)
q, k, v = (torch.randn(64, 4, 42, 8, requires_grad=True) for _ in range(3))
times = torch.cumsum(torch.rand(64, 42) + 0.5, -1)
out = continuous_attention(q, k, v, times=times, backend="torch")
out.backward(torch.cos(out.detach()))
model = PatchTST(n_channels=3, lookback=48, horizon=12, patch_len=8, stride=4, d_model=16, n_heads=2,
                 n_layers=1, d_ff=32, attention="continuous", attention_backend="torch")
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
x, y = torch.randn(32, 48, 3), torch.randn(32, 12, 3)
for _ in range(3):
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
for t in [out, q.grad, k.grad, v.grad, *model.state_dict().values()]:
    digest.update(t.detach().numpy().tobytes())
print(json.dumps({"outcome": outcome, "faults": faults_per_block(), "digest": digest.hexdigest()}))
"""


def probe(setting: str) -> dict:
    env = {**os.environ, allocator.ENV: setting, "OMP_NUM_THREADS": "1"}
    for name in (*allocator.GLIBC_MALLOC_ENV, "GLIBC_TUNABLES"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.skipif(not ON_GLIBC, reason="the setting applies to glibc's malloc only")
def test_freed_blocks_are_reused_instead_of_faulted_in_again_and_results_do_not_change():
    on, off = probe("1"), probe("0")
    assert "keeps freed memory" in on["outcome"] and "left as it is" in off["outcome"]
    block_pages = (48 << 20) / os.sysconf("SC_PAGE_SIZE")
    assert off["faults"] > 0.5 * block_pages, "without the setting every block is mapped anew (the premise)"
    assert on["faults"] < 0.25 * off["faults"], "with it, a freed block is reused"
    assert on["digest"] == off["digest"], "the op's outputs, gradients and a model's trained weights must not change"


@pytest.mark.skipif(not (ON_GLIBC and shutil.which("cc")), reason="needs glibc and a C compiler")
def test_a_preloaded_malloc_is_left_alone(tmp_path):
    source = tmp_path / "shim.c"
    source.write_text("#include <stddef.h>\nextern void *__libc_malloc(size_t);\n"
                      "void *malloc(size_t n) { return __libc_malloc(n); }\n")
    shim = tmp_path / "libshim.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(shim), str(source)], check=True, timeout=60)
    env = {**os.environ, "LD_PRELOAD": str(shim)}
    code = "from ts_continuum.allocator import glibc_mallopt; print(glibc_mallopt()[1])"
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "another allocator replaces glibc's malloc" in done.stdout, done.stderr[-2000:]


RELEASE_PROBE = """
import json, resource, torch
from ts_continuum import allocator
allocator.keep_freed_memory()

def rss_mb():
    return int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize() / 2**20

blocks = [torch.ones(1 << 18) for _ in range(300)]  # 300 blocks of 1 MB, on the heap under this setting
loaded = rss_mb()
del blocks
kept = rss_mb()
released = allocator.release_freed_memory()
print(json.dumps({"loaded": loaded, "kept": kept, "after": rss_mb(), "released": released}))
"""


@pytest.mark.skipif(not (ON_GLIBC and sys.platform.startswith("linux")), reason="glibc's malloc_trim, read in /proc")
def test_released_memory_goes_back_to_the_system():
    env = {**os.environ, allocator.ENV: "1", "OMP_NUM_THREADS": "1"}
    for name in (*allocator.GLIBC_MALLOC_ENV, "GLIBC_TUNABLES"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-c", RELEASE_PROBE], env=env, cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["released"]
    assert seen["kept"] > seen["loaded"] - 50, "the setting keeps freed blocks resident (the premise)"
    assert seen["after"] < seen["kept"] - 200, "releasing hands the 300 MB of free blocks back"


def test_elsewhere_than_glibc_release_does_nothing(monkeypatch):
    monkeypatch.setattr(allocator, "_glibc", lambda: (None, "the C library is not glibc"))
    assert allocator.release_freed_memory() is False


def test_the_callback_releases_every_n_steps_and_after_each_evaluation(monkeypatch):
    from ts_continuum.training import ReleaseFreedMemory

    calls = []
    monkeypatch.setattr(allocator, "release_freed_memory", lambda: calls.append(1) or True)
    callback = ReleaseFreedMemory(every_n_steps=3)
    callback.on_train_start(None, None)
    for batch_idx in range(10):
        callback.on_train_batch_end(None, None, None, None, batch_idx)
    assert len(calls) == 4  # at the start, after batches 2, 5 and 8
    callback.on_validation_end(None, None)
    callback.on_test_end(None, None)
    assert len(calls) == 6 and callback.releases == 6


@pytest.mark.parametrize("bad", [0, -5, 2.5, True, "50"])
def test_the_callback_refuses_a_step_count_that_is_not_a_whole_positive_number(bad):
    from ts_continuum.training import ReleaseFreedMemory

    with pytest.raises(ValueError, match="every_n_steps must be a whole number >= 1"):
        ReleaseFreedMemory(every_n_steps=bad)


def test_the_query_forecaster_adds_the_release_to_the_users_callbacks():
    from lightning.pytorch.callbacks import EarlyStopping

    from ts_continuum.forecasting.query_fit import with_memory_release
    from ts_continuum.training import ReleaseFreedMemory

    mine = EarlyStopping(monitor="val_mse")
    for given in (mine, [mine], (mine,)):
        kwargs = with_memory_release({"max_epochs": 3, "callbacks": given})
        assert kwargs["max_epochs"] == 3 and kwargs["callbacks"][0] is mine
        assert [type(c) for c in kwargs["callbacks"][1:]] == [ReleaseFreedMemory]
    assert [type(c) for c in with_memory_release({})["callbacks"]] == [ReleaseFreedMemory]
    own = ReleaseFreedMemory(every_n_steps=7)
    assert with_memory_release({"callbacks": [own]})["callbacks"] == [own]  # the user's own is not doubled
