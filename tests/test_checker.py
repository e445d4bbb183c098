"""The law checker catches planted defects, and each names the broken law."""
from typing import NamedTuple

import pytest
import torch

import fmetrics as fm
from fmetrics.state import merge_fields
from fmetrics.testing import check_metric


class MeanState(NamedTuple):
    total: torch.Tensor
    count: torch.Tensor


def _batches():
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(n, generator=g) + 5,) for n in (4, 9, 2, 7)]


def _good_parts():
    init = lambda: MeanState(torch.zeros((), dtype=torch.float64), torch.zeros((), dtype=torch.int64))  # noqa: E731
    update = lambda s, x: MeanState(s.total + x.double().sum(), s.count + x.numel())  # noqa: E731
    finalize = lambda s: s.total / s.count  # noqa: E731
    return init, update, finalize


def test_a_correct_metric_passes():
    init, update, finalize = _good_parts()
    m = fm.Metric(init=init, update=update, merge=merge_fields(MeanState("sum", "sum")), finalize=finalize,
                  name="good_mean")
    check_metric(m, _batches(), reference=lambda x: x.double().mean())


def test_catches_in_place_update():
    init, _, finalize = _good_parts()

    def update(s, x):
        s.total.add_(x.double().sum())  # planted: mutates the caller's state
        return MeanState(s.total, s.count + x.numel())

    m = fm.Metric(init=init, update=update, merge=merge_fields(MeanState("sum", "sum")), finalize=finalize,
                  name="inplace_mean")
    with pytest.raises(AssertionError, match="inplace_mean: law 'purity' broken: update: the state was modified"):
        check_metric(m, _batches())


def test_catches_input_mutation():
    init, update, finalize = _good_parts()

    def mutating(s, x):
        x.mul_(1.0).add_(1)  # planted: mutates the inputs
        return update(s, x)

    m = fm.Metric(init=init, update=mutating, merge=merge_fields(MeanState("sum", "sum")), finalize=finalize,
                  name="mut")
    with pytest.raises(AssertionError, match="law 'purity' broken: update: the inputs"):
        check_metric(m, _batches())


def test_catches_mean_of_batch_means():
    init, _, _ = _good_parts()

    def update(s, x):  # planted: averages the running mean with the batch mean
        first = (s.count == 0).double()
        mean = first * x.double().mean() + (1 - first) * (s.total + x.double().mean()) / 2
        return MeanState(mean, s.count + x.numel())

    m = fm.Metric(init=init, update=update, merge=merge_fields(MeanState("sum", "sum")), finalize=lambda s: s.total,
                  name="mean_of_means")
    with pytest.raises(AssertionError, match="mean_of_means: law 'split invariance' broken"):
        check_metric(m, _batches())


def test_catches_non_associative_merge():
    def init():
        return MeanState(torch.zeros((), dtype=torch.float64), torch.zeros((), dtype=torch.int64))

    def update(s, x):  # keeps a correct running mean
        n = s.count + x.numel()
        return MeanState(s.total + (x.double().sum() - s.total * x.numel()) / n.clamp(min=1), n)

    def merge(a, b):  # planted: commutative, init() is its identity, but averages the means unweighted
        avg = (a.total + b.total) / 2
        mean = torch.where(a.count == 0, b.total, torch.where(b.count == 0, a.total, avg))
        return MeanState(mean, a.count + b.count)

    m = fm.Metric(init=init, update=update, merge=merge, finalize=lambda s: s.total, name="avg_merge")
    with pytest.raises(AssertionError, match="avg_merge: law 'merge associativity' broken"):
        check_metric(m, _batches(), rtol=1e-9)


def test_catches_item_in_update():
    init, _, finalize = _good_parts()

    def update(s, x):  # planted: a host sync per batch
        return MeanState(s.total + x.double().sum().item(), s.count + x.numel())

    m = fm.Metric(init=init, update=update, merge=merge_fields(MeanState("sum", "sum")), finalize=finalize,
                  name="item_mean")
    with pytest.raises(AssertionError, match="item_mean: law 'vmap' broken"):
        check_metric(m, _batches())
    with pytest.raises(AssertionError, match="item_mean: law 'no host sync' broken: update calls `item`"):
        check_metric(m, _batches(), laws=("no host sync", "compile"))


def test_catches_data_dependent_branch():
    init, update, finalize = _good_parts()

    def branchy(s, x):
        if x.sum() > 0:  # planted: Python branch on data
            return update(s, x)
        return s

    m = fm.Metric(init=init, update=branchy, merge=merge_fields(MeanState("sum", "sum")), finalize=finalize,
                  name="branchy")
    with pytest.raises(AssertionError, match="branchy: law 'no host sync' broken: update calls `__bool__`"):
        check_metric(m, _batches(), laws=("no host sync",))
    with pytest.raises(AssertionError, match="branchy: law 'compile' broken"):
        check_metric(m, _batches(), laws=("compile",))


def test_catches_boolean_mask_indexing():
    init, update, finalize = _good_parts()
    m = fm.Metric(init=init, update=lambda s, x: update(s, x[x > 5]), merge=merge_fields(MeanState("sum", "sum")),
                  finalize=finalize, name="masked")
    with pytest.raises(AssertionError, match="masked: law 'no host sync' broken: update indexes with a boolean"):
        check_metric(m, _batches(), laws=("no host sync",))


def test_catches_wrong_reference():
    with pytest.raises(AssertionError, match="mean: law 'reference' broken"):
        check_metric(fm.mean(), _batches(), reference=lambda x: x.double().median())


def test_catches_state_that_does_not_serialize():
    init, update, finalize = _good_parts()

    class Unpicklable(NamedTuple):
        total: torch.Tensor
        count: torch.Tensor

    # a state class defined in a local scope cannot be pickled by torch.save
    m = fm.Metric(init=lambda: Unpicklable(*init()), update=lambda s, x: Unpicklable(*update(s, x)),
                  merge=merge_fields(Unpicklable("sum", "sum")), finalize=finalize, name="local_state")
    with pytest.raises(AssertionError, match="local_state: law 'serialization' broken"):
        check_metric(m, _batches(), laws=("serialization",))


def test_unknown_law_is_a_clear_error():
    with pytest.raises(ValueError, match="check_metric: argument `laws`"):
        check_metric(fm.mean(), _batches(), laws=("purity", "speed"))


# ---------------------------------------------------------------- every law and branch has a planted defect


def _sum_metric(name, **changes):
    init, update, finalize = _good_parts()
    fields = dict(init=init, update=update, merge=merge_fields(MeanState("sum", "sum")), finalize=finalize,
                  name=name, reductions=MeanState("sum", "sum"))
    fields.update(changes)
    return fm.Metric(**fields)


def test_catches_merge_that_mutates_its_first_state():
    def merge(a, b):
        a.total.add_(b.total)  # planted
        return MeanState(a.total, a.count + b.count)

    with pytest.raises(AssertionError, match="mm: law 'purity' broken: merge: the first state was modified"):
        check_metric(_sum_metric("mm", merge=merge), _batches(), laws=("purity",))


def test_catches_finalize_that_mutates_the_state():
    def finalize(s):
        s.count.add_(1)  # planted
        return s.total / s.count

    with pytest.raises(AssertionError, match="fm_mut: law 'purity' broken: finalize: the state was modified"):
        check_metric(_sum_metric("fm_mut", finalize=finalize), _batches(), laws=("purity",))


def test_catches_merge_whose_identity_is_not_init():
    def merge(a, b):  # planted: every merge counts one phantom sample
        return MeanState(a.total + b.total, a.count + b.count + 1)

    with pytest.raises(AssertionError, match="ident: law 'merge identity' broken"):
        check_metric(_sum_metric("ident", merge=merge), _batches(), laws=("merge identity",))


def test_catches_merge_that_depends_on_order():
    def merge(a, b):  # planted: keeps the second state's count
        return MeanState(a.total + b.total, torch.where(b.count > 0, b.count, a.count))

    with pytest.raises(AssertionError, match="order: law 'merge order' broken"):
        check_metric(_sum_metric("order", merge=merge), _batches(), laws=("merge order",))


def test_catches_merge_that_breaks_on_an_empty_rank():
    def merge(a, b):  # planted: a rank with no data resets the count (fine for two non-empty states)
        return MeanState(a.total + b.total, torch.where((a.count == 0) | (b.count == 0), a.count * 0 + 1,
                                                        a.count + b.count))

    with pytest.raises(AssertionError, match="dist: law 'distributed equivalence' broken"):
        check_metric(_sum_metric("dist", merge=merge), _batches(), laws=("distributed equivalence",))


def test_catches_a_value_that_changes_under_compile():
    init, update, finalize = _good_parts()

    def sneaky(s, x):
        bump = 1.0 if torch.compiler.is_compiling() else 0.0  # planted: the traced graph adds 1
        return MeanState(s.total + x.double().sum() + bump, s.count + x.numel())

    with pytest.raises(AssertionError, match="cmp: law 'compile' broken: compiled update vs eager"):
        check_metric(_sum_metric("cmp", update=sneaky), _batches(), laws=("compile",))


def test_catches_a_value_that_changes_under_vmap():
    def sneaky(s, x):
        bump = 1.0 if torch._C._are_functorch_transforms_active() else 0.0  # planted
        return MeanState(s.total + x.double().sum() + bump, s.count + x.numel())

    with pytest.raises(AssertionError, match="vm: law 'vmap' broken: vmapped state slice"):
        check_metric(_sum_metric("vm", update=sneaky), _batches(), laws=("vmap",))


class _Flattening(NamedTuple):
    total: torch.Tensor
    count: torch.Tensor

    def __reduce__(self):  # planted: reloads as a plain tuple
        return tuple, ((self.total, self.count),)


class _Forgetful(NamedTuple):
    total: torch.Tensor
    count: torch.Tensor

    def __reduce__(self):  # planted: reloads with the total lost
        return _Forgetful, (torch.zeros_like(self.total), self.count)


def test_catches_state_that_reloads_with_another_structure_or_value():
    for cls, what in ((_Flattening, "the loaded state has another structure"),
                      (_Forgetful, "value of the reloaded state")):
        init, update, finalize = _good_parts()
        m = fm.Metric(init=lambda: cls(*init()), update=lambda s, x: cls(*update(s, x)),
                      merge=lambda a, b: cls(a.total + b.total, a.count + b.count), finalize=finalize, name="ser")
        with pytest.raises(AssertionError, match=f"ser: law 'serialization' broken: {what}"):
            check_metric(m, _batches(), laws=("serialization",))


def test_catches_an_integer_state_that_depends_on_the_batching():
    init, update, finalize = _good_parts()

    def counting_calls(s, x):  # planted: counts update calls, not samples; finalize never reads it
        return MeanState(s.total + x.double().sum(), s.count + 1)

    m = _sum_metric("calls", update=counting_calls, finalize=lambda s: s.total)
    with pytest.raises(AssertionError, match="calls: law 'split invariance' broken: re-batching #0: integer state"):
        check_metric(m, _batches(), laws=("split invariance",))


def test_catches_a_recompile_storm():
    class Grow(NamedTuple):
        chunks: tuple

    storm = fm.Metric(init=lambda: Grow(()), update=lambda s, x: Grow(s.chunks + (x * 1.0,)),
                      merge=lambda a, b: Grow(a.chunks + b.chunks),
                      finalize=lambda s: torch.cat(s.chunks).sum() if s.chunks else torch.zeros(()), name="storm")
    g = torch.Generator().manual_seed(0)
    with pytest.raises(AssertionError, match="storm: law 'compile epoch' broken"):
        check_metric(storm, [torch.rand(n, generator=g) for n in (3, 5, 7, 9, 11, 13, 2, 4, 6, 8, 10, 12)],
                     laws=("compile epoch",))


def test_shared_epochs_trace_once_per_state_key_and_data(monkeypatch):
    """``epochs``: a metric with the state key of an earlier check, on the same data, reuses its compiled
    epoch (its own finalize still compared); other data or no state key trace anew."""
    from fmetrics import testing

    traced = []
    real = testing._run_compiled_epoch
    monkeypatch.setattr(testing, "_run_compiled_epoch", lambda m, pieces: traced.append(m.name) or real(m, pieces))
    epochs = {}
    laws = ("compile", "compile epoch")
    mean = _sum_metric("mean", state_key="sums")
    total = _sum_metric("total", state_key="sums", finalize=lambda s: s.total)
    check_metric(mean, _batches(), laws=laws, epochs=epochs)
    check_metric(total, _batches(), laws=laws, epochs=epochs)
    assert traced == ["mean"] and len(epochs) == 1
    other = [(x + 1,) for (x,) in _batches()]
    check_metric(total, other, laws=laws, epochs=epochs)
    check_metric(_sum_metric("keyless"), _batches(), laws=laws, epochs=epochs)
    check_metric(_sum_metric("keyless"), _batches(), laws=laws, epochs=epochs)
    assert traced == ["mean", "total", "keyless", "keyless"] and len(epochs) == 2


def test_the_compile_law_alone_reuses_an_epoch_and_otherwise_traces_one_update(monkeypatch):
    """Without the compile epoch law, the compile law takes an epoch compiled by an earlier check of the same
    state key and data; with none it compiles one update (no epoch), and it still catches a wrong value."""
    import torch._dynamo

    from fmetrics import testing

    traced, compiled = [], []
    real_epoch, real_compile = testing._run_compiled_epoch, torch.compile
    monkeypatch.setattr(testing, "_run_compiled_epoch", lambda m, pieces: traced.append(m.name) or real_epoch(m, pieces))
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: compiled.append(kw) or real_compile(fn, **kw))
    epochs = {}
    check_metric(_sum_metric("first", state_key="sums"), _batches(), laws=("compile", "compile epoch"), epochs=epochs)
    check_metric(_sum_metric("option", state_key="sums"), _batches(), laws=("compile",), epochs=epochs)
    assert traced == ["first"] and len(compiled) == 1  # the option took the first metric's epoch
    check_metric(_sum_metric("alone", state_key="other"), _batches(), laws=("compile",), epochs=epochs)
    assert traced == ["first"] and len(compiled) == 2 and len(epochs) == 1  # one update, no epoch kept

    def wrong_when_traced(s, x):  # eager and compiled disagree: torch.compiler.is_compiling() is True only traced
        return s._replace(total=s.total + x.sum(dtype=s.total.dtype) * (2 if torch.compiler.is_compiling() else 1),
                          count=s.count + x.numel())

    init, _, finalize = _good_parts()
    wrong = fm.Metric(init=init, update=wrong_when_traced, merge=merge_fields(MeanState("sum", "sum")),
                      finalize=finalize, name="wrong", state_key="wrong")
    with pytest.raises(AssertionError, match="wrong: law 'compile' broken: compiled update vs eager"):
        check_metric(wrong, _batches(), laws=("compile",), epochs=epochs)


def test_a_shared_epoch_keeps_its_failure():
    class Grow(NamedTuple):
        chunks: tuple

    def storm(name):
        return fm.Metric(init=lambda: Grow(()), update=lambda s, x: Grow(s.chunks + (x * 1.0,)),
                         merge=lambda a, b: Grow(a.chunks + b.chunks), state_key="grow", name=name,
                         finalize=lambda s: torch.cat(s.chunks).sum() if s.chunks else torch.zeros(()))
    g = torch.Generator().manual_seed(0)
    batches = [torch.rand(n, generator=g) for n in (3, 5, 7, 9, 11, 13, 2, 4, 6, 8, 10, 12)]
    epochs = {}
    for name in ("first", "second"):
        with pytest.raises(AssertionError, match=f"{name}: law 'compile epoch' broken: 12 compiled updates failed"):
            check_metric(storm(name), batches, laws=("compile epoch",), epochs=epochs)
    assert len(epochs) == 1


def test_a_missing_reference_is_reported_as_skipped_not_passed():
    report = check_metric(fm.mean(), _batches(), laws=("reference", "purity"))
    assert report.skipped["reference"] == "no reference given" and "reference" not in report.passed
    assert report.passed == ("purity",)


def _host_constant_metric(name, update):
    init, _, finalize = _good_parts()
    return fm.Metric(init=init, update=update, merge=merge_fields(MeanState("sum", "sum")), finalize=finalize,
                     name=name)


def test_catches_a_host_constant_built_on_the_device_every_update():
    def update(s, x):  # planted: torch.tensor(python data, device=...) is a host-to-device copy per batch
        offset = torch.tensor([0.0, 0.0], device=x.device).sum()
        return MeanState(s.total + (x.double() + offset).sum(), s.count + x.numel())

    with pytest.raises(AssertionError, match=r"host_tensor: law 'no host sync' broken: update copies host data "
                                             r"to the device on every call \(torch.tensor\(host data, device=meta"):
        check_metric(_host_constant_metric("host_tensor", update), _batches(), laws=("no host sync",))


def test_catches_a_host_constant_moved_to_the_device_every_update():
    weights = torch.ones(2, dtype=torch.float64)

    def update(s, x):  # planted: a module-level host constant moved with .to(device) on every batch
        return MeanState(s.total + x.double().sum() * weights.to(x.device)[0], s.count + x.numel())

    with pytest.raises(AssertionError, match=r"moved: law 'no host sync' broken: .*_to_copy.* of a host tensor "
                                             r"of shape \(2,\)"):
        check_metric(_host_constant_metric("moved", update), _batches(), laws=("no host sync",))


def test_catches_a_python_list_index():
    def update(s, x):  # planted: a list index becomes a host index tensor copied to the device
        return MeanState(s.total + x.double()[[0]].sum() * 0 + x.double().sum(), s.count + x.numel())

    with pytest.raises(AssertionError, match="listed: law 'no host sync' broken: update indexes with a Python"):
        check_metric(_host_constant_metric("listed", update), _batches(), laws=("no host sync",))


def test_catches_a_syncing_solver():
    def update(s, x):  # planted: torch.linalg.svdvals synchronizes a CUDA device
        scale = torch.linalg.svdvals(torch.eye(2, dtype=torch.float64)).max()
        return MeanState(s.total + x.double().sum() * scale, s.count + x.numel())

    with pytest.raises(AssertionError, match="solver: law 'no host sync' broken: update calls `linalg_svdvals`"):
        check_metric(_host_constant_metric("solver", update), _batches(), laws=("no host sync",))


def test_a_constant_built_once_per_device_is_allowed():
    cache = {}

    def update(s, x):  # built on the device by the first update, reused after: no per-update copy
        if x.device not in cache:
            cache[x.device] = torch.tensor([1.0, 1.0], dtype=torch.float64).to(x.device)
        return MeanState(s.total + x.double().sum() * cache[x.device][0], s.count + x.numel())

    check_metric(_host_constant_metric("cached", update), _batches(), laws=("no host sync",))


# which planted-defect tests each law must catch: with the law disabled, every one of them fails
PLANTED = {
    "purity": [test_catches_in_place_update, test_catches_input_mutation,
               test_catches_merge_that_mutates_its_first_state, test_catches_finalize_that_mutates_the_state],
    "reference": [test_catches_wrong_reference],
    "split invariance": [test_catches_mean_of_batch_means, test_catches_an_integer_state_that_depends_on_the_batching],
    "merge identity": [test_catches_merge_whose_identity_is_not_init],
    "merge order": [test_catches_merge_that_depends_on_order],
    "merge associativity": [test_catches_non_associative_merge],
    "distributed equivalence": [test_catches_merge_that_breaks_on_an_empty_rank],
    "vmap": [test_catches_a_value_that_changes_under_vmap],
    "no host sync": [test_catches_boolean_mask_indexing, test_catches_a_host_constant_built_on_the_device_every_update,
                     test_catches_a_host_constant_moved_to_the_device_every_update, test_catches_a_python_list_index,
                     test_catches_a_syncing_solver],
    "compile": [test_catches_a_value_that_changes_under_compile],
    "compile epoch": [test_catches_a_recompile_storm],
    "serialization": [test_catches_state_that_does_not_serialize,
                      test_catches_state_that_reloads_with_another_structure_or_value],
}


@pytest.mark.parametrize("law", list(PLANTED))
def test_the_checker_checks_itself(law, monkeypatch):
    """Disabling a law makes its planted-defect tests fail: none of them passes by accident."""
    from fmetrics import testing

    assert set(PLANTED) == set(testing.LAWS)
    monkeypatch.setitem(testing._CHECKS, law, lambda ctx: None)
    for planted in PLANTED[law]:
        try:
            planted()
        except BaseException as err:  # noqa: BLE001 - pytest.raises' "DID NOT RAISE" is a BaseException
            if isinstance(err, KeyboardInterrupt):
                raise
            continue
        pytest.fail(f"{planted.__name__} still passes with law {law!r} disabled")
