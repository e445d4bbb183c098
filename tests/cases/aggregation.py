"""Law-suite cases for the aggregation metrics; oracles are numpy formulas."""
import numpy as np
import torch

import fmetrics as fm
from tests.cases import Case


def _values(seed, nan=False, shape=()):
    g = torch.Generator().manual_seed(seed)
    out = []
    for n in (7, 1, 12, 5):
        x = torch.randn((n, *shape), generator=g) * 3 + 1
        if nan:
            x[torch.rand(x.shape, generator=g) < 0.2] = float("nan")
        out.append((x,))
    return out


def _weighted(seed):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(n, generator=g), torch.rand(n, generator=g)) for n in (6, 9, 1, 4)]


def _np(x):
    return x.double().numpy()


CASES = [
    Case("sum", fm.sum, {}, _values, reference=lambda x: np.sum(_np(x))),
    Case("sum-nan-ignore", fm.sum, {"nan_strategy": "ignore"}, lambda s: _values(s, nan=True),
         reference=lambda x: np.nansum(_np(x))),
    Case("sum-nan-replace", fm.sum, {"nan_strategy": 2.0}, lambda s: _values(s, nan=True),
         reference=lambda x: np.sum(np.nan_to_num(_np(x), nan=2.0))),
    Case("mean", fm.mean, {}, lambda s: _values(s, shape=(3,)), reference=lambda x: np.mean(_np(x))),
    Case("mean-weighted", fm.mean, {}, _weighted,
         reference=lambda x, w: np.sum(_np(x) * _np(w)) / np.sum(_np(w))),
    Case("mean-nan-ignore", fm.mean, {"nan_strategy": "ignore"}, lambda s: _values(s, nan=True),
         reference=lambda x: np.nanmean(_np(x))),
    # NaN on odd seeds only: the value propagates NaN there and is finite on even seeds
    Case("mean-nan-disable", fm.mean, {"nan_strategy": "disable"}, lambda s: _values(s, nan=s % 2 == 1),
         reference=lambda x: np.mean(_np(x))),
    Case("min", fm.min, {}, _values, reference=lambda x: np.min(_np(x))),
    Case("min-nan-ignore", fm.min, {"nan_strategy": "ignore"}, lambda s: _values(s, nan=True),
         reference=lambda x: np.nanmin(_np(x))),
    Case("max", fm.max, {}, lambda s: _values(s, shape=(2,)), reference=lambda x: np.max(_np(x))),
    Case("max-nan-replace", fm.max, {"nan_strategy": 100.0}, lambda s: _values(s, nan=s % 2 == 1),
         reference=lambda x: np.max(np.nan_to_num(_np(x), nan=100.0))),
    Case("cat", fm.cat, {}, lambda s: _values(s, shape=(2,)), reference=lambda x: _np(x),
         check={"canonical": lambda v: torch.sort(torch.as_tensor(v).reshape(-1)).values}),
    Case("cat-nan-ignore", fm.cat, {"nan_strategy": "ignore"}, lambda s: _values(s, nan=True),
         reference=lambda x: _np(x)[~np.isnan(_np(x))],
         check={"canonical": lambda v: torch.sort(torch.as_tensor(v).reshape(-1)).values}),
]
