"""`check_metric`: the law checker (DESIGN.md §2) for shipped and user metrics.

Every law is a small function; `check_metric` runs the selected ones and
raises ``AssertionError("<metric>: law '<law>' broken: ...")`` at the first
broken law.

Laws (names accepted by ``laws=``):

* ``purity`` -- update / merge / finalize leave states and inputs unchanged.
* ``reference`` -- the one-shot value matches ``reference(*all_inputs)``.
* ``split invariance`` -- random re-batchings (empty batches included, in
  shuffled order) give the one-shot value; integer states match exactly.
* ``merge identity`` -- ``merge(init(), s)`` and ``merge(s, init())`` are ``s``.
* ``merge order`` -- ``finalize(merge(a, b)) == finalize(merge(b, a))``.
* ``merge associativity`` -- ``merge(merge(a, b), c) == merge(a, merge(b, c))``.
* ``distributed equivalence`` -- uneven shards, a rank with no data
  (``init()``), folded in rank order, give the one-shot value.
* ``vmap`` -- ``torch.func.vmap(update)`` over a stacked state matches
  per-slice updates.
* ``no host sync`` -- update calls nothing that copies data to the host
  (``.item()``, ``.tolist()``, ``.cpu()``, ``bool(tensor)``, boolean-mask
  indexing, ``nonzero``, the ``torch.linalg`` solvers documented to sync):
  checked with a `TorchFunctionMode`, so it also holds on CPU, where such calls
  cost nothing and go unnoticed. A second update then runs on the ``meta``
  device, standing in for a GPU: it may not copy a host tensor there
  (``torch.tensor(..., device=...)``, ``.to(device)`` of a host constant, a
  host index tensor), since a pageable copy synchronizes a GPU. Constants are
  built on the state's device once (the first update may build them).
* ``compile`` -- ``torch.compile(update, backend="eager", fullgraph=True)``
  traces with no graph break and matches eager.
* ``compile epoch`` -- the compiled update runs >= 10 consecutive updates of
  varying batch sizes with at most `MAX_EPOCH_COMPILES` (4) compilations,
  however long the epoch: a static first graph, one more for a state whose
  shape is fixed by the first batch (lazily sized tables), then dynamic
  shapes -- no recompile storm as chunk tuples grow or batch sizes change.
* ``serialization`` -- a state survives ``torch.save`` / ``torch.load``.

Inputs: ``batches`` is a list of input tuples ``update(state, *batch)``; the
first axis of every tensor (or list) in a batch is the sample axis.

Host-input metrics (``metric.host_input``: strings, C libraries) are checked
in host-input mode: every law but ``vmap``, ``no host sync``, ``compile`` and
``compile epoch`` (DESIGN §2.5); the returned `CheckReport` names the
skipped laws and why.
"""
from __future__ import annotations

import copy
import hashlib
import io
import random
import warnings
from typing import Any, Callable, NamedTuple, Optional, Sequence

import torch
import torch.utils._pytree as pytree
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from fmetrics import state as state_lib
from fmetrics.metric import Metric

__all__ = ["LAWS", "TRACE_LAWS", "CheckReport", "check_metric", "assert_values_close", "concat_inputs",
           "split_inputs"]

LAWS = (
    "purity",
    "reference",
    "split invariance",
    "merge identity",
    "merge order",
    "merge associativity",
    "distributed equivalence",
    "vmap",
    "no host sync",
    "compile",
    "compile epoch",
    "serialization",
)

TRACE_LAWS = ("vmap", "no host sync", "compile", "compile epoch")
MAX_EPOCH_COMPILES = 4
_HOST_REASON = "host-input metric (DESIGN §2.5): update works on Python data, not traceable tensors"


class CheckReport(NamedTuple):
    """What `check_metric` checked: the laws that held and the skipped ones with the reason."""

    metric: str
    passed: tuple
    skipped: dict

    def __repr__(self) -> str:
        skipped = "; ".join(f"{law!r}: {why}" for law, why in self.skipped.items()) or "none"
        return f"CheckReport({self.metric}: {len(self.passed)} laws held; skipped: {skipped})"


class _Broken(AssertionError):
    pass


# ---------------------------------------------------------------- inputs


def _length(x) -> Optional[int]:
    if isinstance(x, torch.Tensor):
        return x.shape[0] if x.dim() else None
    if isinstance(x, dict):
        return next((n for n in map(_length, x.values()) if n is not None), None)
    if isinstance(x, (list, tuple)):
        return len(x)
    return None


def _num_samples(batch: tuple) -> int:
    n = next((n for n in map(_length, batch) if n is not None), None)
    if n is None:
        raise ValueError("check_metric: each batch needs a tensor or list with a sample axis")
    return n


def _take(x, lo: int, hi: int):
    if isinstance(x, dict):
        return {k: _take(v, lo, hi) for k, v in x.items()}
    if _length(x) is None:
        return x  # scalars and other non-sample arguments travel as they are
    return x[lo:hi]


def _join(xs: list):
    x0 = xs[0]
    if isinstance(x0, dict):
        return {k: _join([x[k] for x in xs]) for k in x0}
    if isinstance(x0, torch.Tensor) and x0.dim():
        return torch.cat(xs, dim=0)
    if isinstance(x0, (list, tuple)):
        return type(x0)(item for x in xs for item in x)
    return x0


def concat_inputs(batches: Sequence[tuple]) -> tuple:
    """All batches joined into one along the sample axis."""
    return tuple(_join([b[i] for b in batches]) for i in range(len(batches[0])))


def split_inputs(inputs: tuple, cuts: Sequence[int]) -> list[tuple]:
    """Splits joined inputs at sample positions ``cuts`` (sorted, may repeat)."""
    edges = [0, *cuts, _num_samples(inputs)]
    return [tuple(_take(x, lo, hi) for x in inputs) for lo, hi in zip(edges[:-1], edges[1:])]


def _as_batch(b) -> tuple:
    return b if isinstance(b, tuple) else (b,)


# ---------------------------------------------------------------- values


def assert_values_close(actual, expected, rtol: float, atol: float, what: str = "value") -> None:
    """Recursive `torch.testing.assert_close` over dicts / tuples, NaN == NaN."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict) or set(actual) != set(expected):
            raise AssertionError(f"{what}: keys {sorted(actual) if isinstance(actual, dict) else actual!r} "
                                 f"!= {sorted(expected)}")
        for k in expected:
            assert_values_close(actual[k], expected[k], rtol, atol, f"{what}[{k!r}]")
        return
    if isinstance(expected, (tuple, list)):
        if not isinstance(actual, (tuple, list)) or len(actual) != len(expected):
            raise AssertionError(f"{what}: expected a sequence of {len(expected)}, got {actual!r}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            assert_values_close(a, e, rtol, atol, f"{what}[{i}]")
        return
    a = torch.as_tensor(actual)
    e = torch.as_tensor(expected)
    if a.is_floating_point() or e.is_floating_point():
        a, e = a.double(), e.double()
    try:
        torch.testing.assert_close(a.cpu(), e.cpu(), rtol=rtol, atol=atol, equal_nan=True, check_dtype=False)
    except AssertionError as err:
        raise AssertionError(f"{what}: {err}") from None


def _clone(tree):
    return pytree.tree_map(lambda x: x.clone() if isinstance(x, torch.Tensor) else copy.deepcopy(x), tree)


def _assert_unchanged(before, after, what: str) -> None:
    fb, sb = pytree.tree_flatten(before)
    fa, sa = pytree.tree_flatten(after)
    if sb != sa:
        raise _Broken(f"{what} changed structure")
    for x, y in zip(fb, fa):
        if isinstance(x, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype or not torch.equal(
                torch.nan_to_num(x.detach()) if x.is_floating_point() else x,
                torch.nan_to_num(y.detach()) if y.is_floating_point() else y,
            ) or (x.is_floating_point() and not torch.equal(x.isnan(), y.isnan())):
                raise _Broken(f"{what} was modified in place")
        elif x != y:
            raise _Broken(f"{what} was modified in place")


def _assert_int_states_equal(a, b, what: str, tags=None) -> None:
    """Integer leaves of two same-layout states must match exactly.

    With reduction ``tags``, only tagged fields are compared: a field only
    ``merge`` knows (tag ``None``, e.g. the update-call index of a deferred
    validation record) may depend on the batching.
    """
    if tags is not None and not isinstance(tags, str):
        if pytree.tree_structure(a) != pytree.tree_structure(b):
            return
        state_lib.apply_tags(lambda t, x, y: _assert_int_states_equal(x, y, what) if t is not None else x,
                             tags, a, b)
        return
    fa, sa = pytree.tree_flatten(a)
    fb, sb = pytree.tree_flatten(b)
    if sa != sb:
        return  # e.g. chunked fields split differently; the values are compared instead
    for x, y in zip(fa, fb):
        if isinstance(x, torch.Tensor) and not x.is_floating_point() and not x.is_complex():
            if x.shape == y.shape and not torch.equal(x, y):
                raise _Broken(f"{what}: integer state differs: {x} vs {y}")


# ---------------------------------------------------------------- the checker


class _Ctx:
    def __init__(self, metric, batches, reference, rtol, atol, ref_rtol, ref_atol, canonical, rng, num_splits,
                 shared_epoch=False, epochs=None):
        self.m = metric
        self.batches = [_as_batch(b) for b in batches]
        self.reference = reference
        self.rtol, self.atol = rtol, atol
        self.ref_rtol, self.ref_atol = ref_rtol, ref_atol
        self.canonical = canonical or (lambda v: v)
        self.rng = rng
        self.num_splits = num_splits
        self.full = concat_inputs(self.batches)
        self.n = _num_samples(self.full)
        self.expected = self.value(self.run([self.full]))
        self.shared_epoch = shared_epoch  # the compile law checks the compile epoch law's run (both requested)
        self.epochs = epochs  # compiled epochs of earlier checks (`check_metric`'s ``epochs``), or None
        self._pieces = None  # `epoch_pieces`
        self._epoch = None

    def compiled_epoch(self, compile: bool = True) -> Optional["_Epoch"]:
        """The update compiled as a user compiles it (eager backend, ``fullgraph=True``, dynamo's automatic
        dynamic shapes) and run from `init` over ~10 uneven pieces of the data: once per check, shared by the
        two compile laws (traces are most of their time), and with ``epochs`` by later checks of a metric
        with the same ``state_key`` (one update, by contract) on the same pieces. ``compile=False``: only
        such an earlier epoch, else None."""
        if self._epoch is None:
            pieces = self.epoch_pieces()
            key = None if self.epochs is None or self.m.state_key is None else \
                (self.m.state_key, _fingerprint(pieces))
            if key is not None and key in self.epochs:
                self._epoch = self.epochs[key]._replace(pieces=pieces)
            elif not compile:
                return None
            else:
                self._epoch = _run_compiled_epoch(self.m, pieces)
                if key is not None:
                    self.epochs[key] = self._epoch._replace(pieces=None)
        return self._epoch

    def epoch_pieces(self) -> list:
        """The compiled epoch's >= 10 uneven pieces of the data, drawn once."""
        if self._pieces is None:
            pieces = [p for p in split_inputs(self.full, sorted(self.rng.randint(0, self.n) for _ in range(11)))
                      if _num_samples(p)]
            while len(pieces) < 10:
                pieces = pieces + pieces  # repeat the data: the epoch is about recompiles
            self._pieces = pieces
        return self._pieces

    def run(self, batches, state=None):
        s = self.m.init() if state is None else state
        for b in batches:
            s = self.m.update(s, *b)
        return s

    def value(self, state):
        return self.canonical(self.m.finalize(state))

    def close(self, actual, expected, what):
        try:
            assert_values_close(actual, expected, self.rtol, self.atol, what)
        except AssertionError as err:
            raise _Broken(str(err)) from None

    def random_cuts(self, pieces: int) -> list[int]:
        return sorted(self.rng.randint(0, self.n) for _ in range(pieces - 1))

    def thirds(self):
        a, b = sorted((self.rng.randint(0, self.n), self.rng.randint(0, self.n)))
        return [self.run([p]) for p in split_inputs(self.full, [a, b])]


def _law_purity(c: _Ctx):
    m = c.m
    s = c.run(c.batches[:1])
    for b in c.batches:
        s_before, b_before = _clone(s), _clone(b)
        s2 = m.update(s, *b)
        _assert_unchanged(s_before, s, "update: the state")
        _assert_unchanged(b_before, b, "update: the inputs")
        s = s2
    other = c.run(c.batches[-1:])
    s_before, o_before = _clone(s), _clone(other)
    m.merge(s, other)
    _assert_unchanged(s_before, s, "merge: the first state")
    _assert_unchanged(o_before, other, "merge: the second state")
    m.finalize(s)
    _assert_unchanged(s_before, s, "finalize: the state")


def _law_reference(c: _Ctx):
    if c.reference is None:
        return
    want = c.canonical(c.reference(*c.full))
    try:
        assert_values_close(c.expected, want, c.ref_rtol, c.ref_atol, "value vs reference")
    except AssertionError as err:
        raise _Broken(str(err)) from None


def _law_split(c: _Ctx):
    c.close(c.value(c.run(c.batches)), c.expected, "value with the given batches")
    one_shot = c.run([c.full])
    for i in range(c.num_splits):
        pieces = split_inputs(c.full, c.random_cuts(c.rng.randint(2, 6)))
        pieces.insert(c.rng.randint(0, len(pieces)), split_inputs(c.full, [0])[0])  # an empty batch
        c.rng.shuffle(pieces)
        s = c.run(pieces)
        _assert_int_states_equal(s, one_shot, f"re-batching #{i}", c.m.reductions)
        c.close(c.value(s), c.expected, f"value after re-batching #{i} into {len(pieces)} batches")


def _law_identity(c: _Ctx):
    s = c.run(c.batches)
    want = c.value(s)
    c.close(c.value(c.m.merge(c.m.init(), s)), want, "merge(init(), s)")
    c.close(c.value(c.m.merge(s, c.m.init())), want, "merge(s, init())")


def _law_order(c: _Ctx):
    a, b, _ = c.thirds()
    c.close(c.value(c.m.merge(b, a)), c.value(c.m.merge(a, b)), "merge(b, a) vs merge(a, b)")


def _law_assoc(c: _Ctx):
    a, b, d = c.thirds()
    m = c.m
    left = m.merge(m.merge(a, b), d)
    right = m.merge(a, m.merge(b, d))
    _assert_int_states_equal(left, right, "merge(merge(a, b), c) vs merge(a, merge(b, c))", m.reductions)
    c.close(c.value(left), c.value(right), "merge(merge(a, b), c) vs merge(a, merge(b, c))")
    c.close(c.value(left), c.expected, "merge of three parts vs one shot")


def _law_distributed(c: _Ctx):
    for world in (2, 3):
        shards = split_inputs(c.full, c.random_cuts(world))
        states = []
        for shard in shards:
            n = _num_samples(shard)
            half = c.rng.randint(0, n)
            states.append(c.run(split_inputs(shard, [half])))
        states.insert(c.rng.randint(0, len(states)), c.m.init())  # a rank that saw no data
        folded = state_lib.fold(c.m.merge, states)
        c.close(c.value(folded), c.expected, f"{world + 1} ranks (one empty) folded in rank order")


def _first_nonempty(c: _Ctx) -> tuple:
    return next((b for b in c.batches if _num_samples(b) > 0), c.full)


def _permuted(batch: tuple, perm: torch.Tensor) -> tuple:
    n = _num_samples(batch)
    return tuple(x[perm] if isinstance(x, torch.Tensor) and x.dim() and x.shape[0] == n else x for x in batch)


def _law_vmap(c: _Ctx):
    b0 = _first_nonempty(c)
    perm = torch.randperm(_num_samples(b0), generator=torch.Generator().manual_seed(c.rng.randint(0, 2**31)))
    b1 = _permuted(b0, perm)
    s0, s1 = c.run([b0]), c.run([b1])
    in_dims = (0,) + tuple(0 if isinstance(x, torch.Tensor) else None for x in b0)
    stacked_inputs = tuple(torch.stack([x, y]) if isinstance(x, torch.Tensor) else x for x, y in zip(b0, b1))
    try:
        out = torch.func.vmap(c.m.update, in_dims=in_dims)(state_lib.stack([s0, s1]), *stacked_inputs)
    except Exception as err:  # noqa: BLE001 - any failure here breaks the law
        raise _Broken(f"update fails under torch.func.vmap: {type(err).__name__}: {err}") from None
    want = [c.m.update(s0, *b0), c.m.update(s1, *b1)]
    for i, (got, w) in enumerate(zip(state_lib.unstack(out), want)):
        try:
            assert_values_close(got, w, c.rtol, c.atol, f"vmapped state slice {i}")
        except AssertionError as err:
            raise _Broken(str(err)) from None


_SYNCING = frozenset({
    "item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__float__", "__index__", "__len__",
    "nonzero", "argwhere", "masked_select", "unique", "unique_consecutive",
    # documented "synchronizes that device with the CPU" on CUDA (their ``_ex`` variants do not)
    "linalg_svd", "linalg_svdvals", "svd", "linalg_eig", "linalg_eigvals", "linalg_eigh", "linalg_eigvalsh",
    "linalg_inv", "inverse", "linalg_solve", "linalg_cholesky", "cholesky", "linalg_lstsq", "linalg_pinv",
    "linalg_matrix_rank",
})


class _NoHostSync(TorchFunctionMode):
    """Raises on tensor calls that would copy device data to the host."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in _SYNCING:
            raise _Broken(f"update calls `{name}`, which syncs the device with the host")
        if name in ("__getitem__", "__setitem__") and len(args) > 1:
            index = args[1] if isinstance(args[1], tuple) else (args[1],)
            if any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in index):
                raise _Broken("update indexes with a boolean mask (a data-dependent shape, a host sync on GPU)")
            if any(isinstance(i, (list, range)) for i in index):
                raise _Broken("update indexes with a Python sequence (an index tensor copied from the host, a "
                              "host sync on GPU): build the index on the device once")
        return func(*args, **(kwargs or {}))


def _caller() -> str:
    """``file:line`` of the innermost fmetrics frame calling into torch (where a copy comes from)."""
    import traceback

    for frame in reversed(traceback.extract_stack()[:-2]):
        if "/fmetrics/" in frame.filename and not frame.filename.endswith("testing.py"):
            return f"{frame.filename.rsplit('/fmetrics/', 1)[-1]}:{frame.lineno}"
    return "?"


class _HostCopies(TorchDispatchMode):
    """Records host tensors an update on the ``meta`` device copies there: ``.to(device)`` / ``copy_`` of a
    host tensor, or a host tensor (not a 0-d scalar) as an operand, e.g. an index built from a list."""

    def __init__(self):
        super().__init__()
        self.found: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        leaves = [x for x in pytree.tree_leaves((args, kwargs)) if isinstance(x, torch.Tensor)]
        outs = [x for x in pytree.tree_leaves(out) if isinstance(x, torch.Tensor)]
        on_meta = any(x.device.type == "meta" for x in leaves + outs)
        copy = func.__name__.split(".")[0] in ("_to_copy", "copy_")
        host = [x for x in leaves if x.device.type == "cpu" and (copy or x.dim() > 0)]
        if on_meta and host:
            self.found.append(f"{func.__name__} of a host tensor of shape {tuple(host[0].shape)} at {_caller()}")
        return out


class _HostFactories(TorchFunctionMode):
    """Records ``torch.tensor(host data, device=d)`` with ``d`` not the host: a host-to-device copy."""

    def __init__(self, found: list):
        super().__init__()
        self.found = found

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        device = kwargs.get("device")
        if getattr(func, "__name__", "") in ("tensor", "as_tensor", "asarray") and device is not None \
                and torch.device(device).type != "cpu" and not isinstance(args[0] if args else None, torch.Tensor):
            self.found.append(f"torch.{func.__name__}(host data, device={device}) at {_caller()}")
        return func(*args, **kwargs)


def _moved(tree, device):
    return pytree.tree_map(lambda x: x.to(device) if isinstance(x, torch.Tensor) else x, tree)


def _law_no_sync(c: _Ctx):
    b0 = _first_nonempty(c)
    s = c.run([b0])
    from fmetrics import validation

    with validation.mode("deferred"), _NoHostSync():  # what a GPU update runs: value checks counted, not raised
        c.m.update(s, *b0)
    meta = torch.device("meta")
    try:  # a metric the meta device cannot run (no meta kernel, host data) is left to the CPU check above
        m, b = c.m.to(meta), _moved(b0, meta)
        with validation.mode("deferred"):
            s = m.update(state_lib.to_device(m.init(), meta), *b)  # may build per-device constants
    except (NotImplementedError, RuntimeError, TypeError, ValueError):
        return
    probe = _HostCopies()
    with validation.mode("deferred"), probe, _HostFactories(probe.found):
        m.update(s, *b)
    if probe.found:
        raise _Broken(f"update copies host data to the device on every call ({probe.found[0]}; "
                      f"{len(probe.found)} in all): a pageable copy synchronizes a GPU -- build constants on "
                      f"the state's device once")


class _Epoch(NamedTuple):
    pieces: list  # the batches, in order
    frames: int  # compiles over the epoch
    error: Optional[str]  # why a compiled update failed, else None
    state: Any  # the state after the compiled epoch


def _fingerprint(tree) -> tuple:
    """Hashable identity of a pytree of inputs: structure, and each tensor's shape, dtype, device and bytes."""
    leaves, spec = pytree.tree_flatten(tree)
    out = [str(spec)]
    for x in leaves:
        if isinstance(x, torch.Tensor):
            data = x.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
            out.append((tuple(x.shape), x.dtype, x.device.type, hashlib.blake2b(data, digest_size=16).digest()))
        else:
            out.append(repr(x))
    return tuple(out)


def _run_compiled_epoch(m: Metric, pieces: list) -> _Epoch:
    import torch._dynamo
    from torch._dynamo.testing import CompileCounterWithBackend

    counter = CompileCounterWithBackend("eager")
    torch._dynamo.reset()
    compiled = torch.compile(m.update, backend=counter, fullgraph=True)
    s, error = m.init(), None
    try:
        for b in pieces:
            s = compiled(s, *b)
    except Exception as err:  # noqa: BLE001
        error, s = f"{type(err).__name__}: {str(err)[:600]}", None
    finally:
        torch._dynamo.reset()
    return _Epoch(pieces, counter.frame_count, error, s)


def _law_compile(c: _Ctx):
    """The update traces with ``fullgraph=True`` and its compiled values are the eager ones: checked on the
    compiled epoch (`_Ctx.compiled_epoch`: updates from `init` and from later states, the last value
    against the eager run of the same pieces) where the compile epoch law runs too, or where an earlier
    check of the same ``state_key`` compiled one (``epochs``). Otherwise, or where the epoch failed, one
    update alone from a fresh cache: this law fails only where a single compiled update does."""
    import torch._dynamo

    epoch = c.compiled_epoch(compile=c.shared_epoch)
    if epoch is not None and epoch.error is None:
        c.close(c.value(epoch.state), c.value(c.run(epoch.pieces)), "compiled update vs eager, the last of an epoch")
        return
    b0 = _first_nonempty(c)
    s = c.run([b0])
    torch._dynamo.reset()
    try:
        got = torch.compile(c.m.update, backend="eager", fullgraph=True)(s, *b0)
    except Exception as err:  # noqa: BLE001
        raise _Broken(f"update does not trace with fullgraph=True: {type(err).__name__}: {str(err)[:800]}") from None
    finally:
        torch._dynamo.reset()
    try:
        assert_values_close(got, c.m.update(s, *b0), c.rtol, c.atol, "compiled update vs eager")
    except AssertionError as err:
        raise _Broken(str(err)) from None


def _law_compile_epoch(c: _Ctx):
    epoch = c.compiled_epoch()
    if epoch.error is not None:
        raise _Broken(f"{len(epoch.pieces)} compiled updates failed: {epoch.error}")
    if epoch.frames > MAX_EPOCH_COMPILES:
        sizes = [_num_samples(p) for p in epoch.pieces]
        raise _Broken(f"{len(sizes)} compiled updates of sizes {sizes} compiled "
                      f"{epoch.frames} times (at most {MAX_EPOCH_COMPILES} allowed: a recompile storm)")


def _law_serialization(c: _Ctx):
    s = c.run(c.batches)
    buf = io.BytesIO()
    torch.save(s, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    if type(loaded) is not type(s) or pytree.tree_structure(loaded) != pytree.tree_structure(s):
        raise _Broken("the loaded state has another structure")
    c.close(c.value(loaded), c.value(s), "value of the reloaded state")


_CHECKS: dict[str, Callable[[_Ctx], None]] = {
    "purity": _law_purity,
    "reference": _law_reference,
    "split invariance": _law_split,
    "merge identity": _law_identity,
    "merge order": _law_order,
    "merge associativity": _law_assoc,
    "distributed equivalence": _law_distributed,
    "vmap": _law_vmap,
    "no host sync": _law_no_sync,
    "compile": _law_compile,
    "compile epoch": _law_compile_epoch,
    "serialization": _law_serialization,
}


def check_metric(
    metric: Metric,
    batches: Sequence[Any],
    reference: Optional[Callable[..., Any]] = None,
    *,
    laws: Sequence[str] = LAWS,
    rtol: float = 1e-6,
    atol: float = 1e-8,
    reference_rtol: Optional[float] = None,
    reference_atol: Optional[float] = None,
    canonical: Optional[Callable[[Any], Any]] = None,
    num_splits: int = 3,
    seed: int = 0,
    host_input: Optional[bool] = None,
    epochs: Optional[dict] = None,
) -> CheckReport:
    """Checks the laws of DESIGN.md §2 on ``metric`` and raises at the first broken one.

    Args:
      metric: any `fmetrics.Metric`.
      batches: list of input tuples (``update(state, *batch)``); a bare tensor
        is a one-argument batch. At least one batch must be non-empty.
      reference: ``reference(*all_inputs)`` -> expected value (numpy, float,
        tensor, or dicts/tuples of them), e.g. a scikit-learn function.
      laws: the laws to check (default: all of `LAWS`). A metric that cannot
        obey one (vmap over Python strings) passes the rest explicitly.
      rtol, atol: tolerance between fmetrics' own values (re-batched, merged,
        compiled); ``reference_rtol/atol`` (default: the same) for the reference.
      canonical: applied to every finalized value before comparing, for
        values that are equal up to order (e.g. ``torch.sort`` for `cat`).
      host_input: check in host-input mode (skips `TRACE_LAWS`); default:
        ``metric.host_input``.
      epochs: a dict kept across calls (a law suite's) to share the compile
        laws' compiled epoch between metrics with one ``state_key`` checked
        on the same pieces: equal keys share one update (a collection runs
        it once), so its trace and recompile count are the same; the value
        law still runs each metric's own ``finalize``. The compile law
        without the compile epoch law takes such an epoch where there is
        one, else compiles one update. Default: no sharing.

    Returns:
      A `CheckReport`: the laws that held and the skipped ones with reasons.

    Raises:
      AssertionError: ``"<name>: law '<law>' broken: <what differed>"``.

    Example::

        >>> check_metric(fmetrics.mean(), [torch.rand(8), torch.rand(5)],
        ...              reference=lambda x: x.double().mean())
        CheckReport(mean: 12 laws held; skipped: none)
    """
    unknown = [law for law in laws if law not in _CHECKS]
    if unknown:
        raise ValueError(f"check_metric: argument `laws` expected names from {LAWS}, got {unknown}")
    if not batches:
        raise ValueError("check_metric: argument `batches` expected at least one batch")
    host = metric.host_input if host_input is None else host_input
    skipped = {law: "not requested" for law in LAWS if law not in laws}
    if reference is None and "reference" in laws:
        skipped["reference"] = "no reference given"
    if host:
        skipped.update({law: _HOST_REASON for law in TRACE_LAWS if law in laws})
    passed = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # value warnings (NaN policy 'warn') repeat in every law
        try:
            ctx = _Ctx(metric, batches, reference, rtol, atol,
                       rtol if reference_rtol is None else reference_rtol,
                       atol if reference_atol is None else reference_atol,
                       canonical, random.Random(seed), num_splits, shared_epoch="compile epoch" not in skipped,
                       epochs=epochs)
        except Exception as err:
            raise AssertionError(f"{metric.name}: the one-shot run failed: {type(err).__name__}: {err}") from err
        for law in LAWS:
            if law in skipped:
                continue
            try:
                _CHECKS[law](ctx)
                passed.append(law)
            except _Broken as err:
                raise AssertionError(f"{metric.name}: law '{law}' broken: {err}") from None
            except Exception as err:
                raise AssertionError(
                    f"{metric.name}: law '{law}' broken: raised {type(err).__name__}: {err}"
                ) from err
    return CheckReport(metric.name, tuple(passed), skipped)
