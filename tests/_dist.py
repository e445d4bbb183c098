"""Real multi-process groups for tests: `spawn(fn, world_size, *args, timeout=120.0)`.

Starts ``world_size`` processes, each joining a gloo
process group on 127.0.0.1 at a free port, runs ``fn(rank, world_size,
*args)`` (a top-level importable function, picklable args), destroys the
group and returns every rank's (picklable) return value in rank order::

    def _body(rank, world_size, x):
        t = torch.tensor([x + rank])
        torch.distributed.all_reduce(t)
        return t.item()

    assert spawn(_body, 2, 10) == [21, 21]

Any rank raising -> ``AssertionError`` carrying that rank's traceback (the
other ranks, possibly stuck in a collective, are killed). Passing
``timeout`` seconds -> every child is killed and ``AssertionError`` is
raised, so a hang fails the test instead of blocking CI.

The processes are forked from a fork server (`multiprocessing`'s
"forkserver" start method; "spawn" where there is none) that has imported
torch, fmetrics and the test helpers once: a group starts in ~50 ms instead
of ~2.5 s of imports per rank. A child sees the environment variables and
``sys.path`` as they were at the first `spawn` call of the test process (its
rank variables aside; a spawned child saw the parent's current ones), and no
Python-level patch of the parent, as before.

`run_script(args, timeout)` runs a launcher command (``torchrun``, a
Lightning "ddp" script) in its own process group and kills that whole group
if it overruns, so re-launched ranks cannot outlive a hung test.

`count_collectives()` counts, inside a rank, the collectives issued and the
bytes this rank hands to them (object collectives count as the tensor
collectives they run).
"""
from __future__ import annotations

import contextlib
import datetime
import os
import pickle
import queue as queue_lib
import signal
import socket
import subprocess
import sys
import time
import traceback

import torch.multiprocessing as mp

__all__ = ["spawn", "run_script", "count_collectives"]

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_GRACE_S = 5.0  # how long the other ranks may take to report once one rank failed
_PORT_RETRIES = 3


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _child(rank: int, world_size: int, port: int, timeout: float, fn, args, results) -> None:
    if REPO not in sys.path:
        sys.path.insert(0, REPO)
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size))
    try:
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                                world_size=world_size, timeout=datetime.timedelta(seconds=timeout))
        payload = (rank, True, pickle.dumps(fn(rank, world_size, *args)))
    except BaseException:  # noqa: BLE001 - reported to the parent
        payload = (rank, False, traceback.format_exc())
    results.put(payload)
    try:
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # noqa: BLE001 - teardown after the result was sent
        pass


def _kill(procs) -> None:
    for p in procs:
        if p.is_alive():
            p.kill()
    for p in procs:
        p.join(5)


# imported once by the fork server, before it forks any rank (a module that is missing is skipped).
# torchmetrics (~4 s of CPU: it pulls in transformers, librosa, onnxruntime, matplotlib) is imported by every
# rank that builds a TorchMetric or runs the registered cases: importing it here once per test process saves
# that in each of those ranks.
_PRELOAD = ["torch", "torch.distributed", "numpy", "fmetrics", "fmetrics.testing", "adapters", "adapters.distributed",
            "tests._dist", "tests.cases", "torchmetrics", "adapters.torch_metric"]


def _context():
    """The fork-server context with `_PRELOAD` (set before the server's first start), else spawn."""
    try:
        ctx = mp.get_context("forkserver")
    except ValueError:  # no fork server on this platform
        return mp.get_context("spawn")
    ctx.set_forkserver_preload(_PRELOAD)
    return ctx


def _run_once(fn, world_size: int, args: tuple, timeout: float):
    ctx = _context()
    results = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_child, args=(r, world_size, port, timeout, fn, args, results))
             for r in range(world_size)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout
    got: dict[int, tuple[bool, object]] = {}
    failed_at = None
    try:
        while len(got) < world_size:
            now = time.monotonic()
            if now > deadline:
                missing = sorted(set(range(world_size)) - set(got))
                errors = [f"rank {r}:\n{v}" for r, (ok, v) in sorted(got.items()) if not ok]
                raise AssertionError(f"spawn: timed out after {timeout:.0f}s waiting for ranks {missing}"
                                     + ("".join("\n" + e for e in errors)))
            if failed_at is not None and now - failed_at > _GRACE_S:
                break
            try:
                rank, ok, value = results.get(timeout=0.1)
            except queue_lib.Empty:
                for r, p in enumerate(procs):  # a child that died without reporting (segfault, kill)
                    if r not in got and p.exitcode is not None:
                        try:
                            rank, ok, value = results.get(timeout=1.0)
                        except queue_lib.Empty:
                            got[r] = (False, f"process exited with code {p.exitcode} without a result")
                            failed_at = failed_at or time.monotonic()
                            break
                        got[rank] = (ok, value)
                        break
                continue
            got[rank] = (ok, value)
            if not ok and failed_at is None:
                failed_at = time.monotonic()
    finally:
        _kill(procs)
        results.close()
    errors = {r: v for r, (ok, v) in got.items() if not ok}
    if errors:
        return None, errors
    return [pickle.loads(got[r][1]) for r in range(world_size)], None


def spawn(fn, world_size: int, *args, timeout: float = 120.0) -> list:
    """Runs ``fn(rank, world_size, *args)`` on ``world_size`` gloo ranks; returns the results in rank order."""
    if world_size < 1:
        raise ValueError(f"spawn: argument `world_size` expected >= 1, got {world_size}")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [REPO] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != REPO])
    for attempt in range(_PORT_RETRIES):
        values, errors = _run_once(fn, world_size, args, timeout)
        if values is not None:
            return values
        port_taken = any("Address already in use" in e or "EADDRINUSE" in e for e in errors.values())
        if not port_taken or attempt == _PORT_RETRIES - 1:
            break
    report = "\n".join(f"--- rank {r} ---\n{tb}" for r, tb in sorted(errors.items()))
    raise AssertionError(f"spawn: {len(errors)} of {world_size} ranks failed running "
                         f"{getattr(fn, '__qualname__', fn)}:\n{report}")


_COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
                "broadcast", "reduce", "gather", "scatter", "all_to_all", "all_to_all_single", "barrier",
                "monitored_barrier", "send", "recv", "isend", "irecv")


def _payload_bytes(name: str, args, kwargs) -> int:
    import torch

    if name in ("barrier", "monitored_barrier"):
        return 0
    index = {"all_gather": 1, "all_gather_into_tensor": 1, "reduce_scatter": 1, "all_to_all": 1,
             "all_to_all_single": 1, "reduce_scatter_tensor": 1}.get(name, 0)
    x = args[index] if len(args) > index else next(iter(kwargs.values()), None)
    tensors = x if isinstance(x, (list, tuple)) else [x]
    return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


@contextlib.contextmanager
def count_collectives():
    """Yields ``{"calls": int, "bytes": int, "ops": {name: calls}}``, filled while the block runs.

    Wraps the tensor collectives of ``torch.distributed`` (both the public
    names and the module-level ones that object collectives call).
    """
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    counts = {"calls": 0, "bytes": 0, "ops": {}}
    saved = []

    def wrap(name, fn):
        def counted(*args, **kwargs):
            counts["calls"] += 1
            counts["ops"][name] = counts["ops"].get(name, 0) + 1
            counts["bytes"] += _payload_bytes(name, args, kwargs)
            return fn(*args, **kwargs)

        return counted

    for module in (dist, c10d):
        for name in _COLLECTIVES:
            fn = getattr(module, name, None)
            if fn is not None:
                saved.append((module, name, fn))
                setattr(module, name, wrap(name, fn))
    try:
        yield counts
    finally:
        for module, name, fn in saved:
            setattr(module, name, fn)


def run_script(args: list, timeout: float = 180.0) -> subprocess.CompletedProcess:
    """Runs ``args`` from the repo root (repo on PYTHONPATH, no inherited rank variables); fails on a
    non-zero exit or after ``timeout`` seconds, killing every process the command started."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE", "NODE_RANK",
                        "LOCAL_WORLD_SIZE", "GROUP_RANK")}
    env["PYTHONPATH"] = os.pathsep.join([REPO] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.setdefault("OMP_NUM_THREADS", "1")
    proc = subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"run_script: {args} timed out after {timeout:.0f}s\n{out[-2000:]}\n{err[-3000:]}")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    if proc.returncode != 0:
        raise AssertionError(f"run_script: {args} exited with {proc.returncode}\n{out[-2000:]}\n{err[-3000:]}")
    return subprocess.CompletedProcess(args, proc.returncode, out, err)
