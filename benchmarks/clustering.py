"""Clustering and nominal workloads: 10^6 labels in 50 clusters fed in 10 batches (10^5 with --quick, AMI 4 x 10^4);
AMI against torchmetrics on 2000 labels (its cost grows too fast for more); Cramér's V over the columns of
a 10^6 x 10 matrix of categories (4 x 10^4 with --quick).

fmetrics' ``init / update* / finalize`` against scikit-learn on the joined labels and torchmetrics'
``update* / compute``.
"""
from __future__ import annotations

import torch

import fmetrics
from benchmarks.registry import fmetrics_run, on_device, register, torchmetrics_run

CLUSTERS, CHUNKS = 50, 10


def _n(quick: bool, small: bool = True) -> int:
    """Labels in a run: 10^6, or with ``--quick`` 10^5 (4 x 10^4 where a peer's call grows fast: ``small``)."""
    return (4 * 10**4 if small else 10**5) if quick else 10**6


def _labels(n: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    target = torch.randint(0, CLUSTERS, (n,), generator=g)
    preds = torch.where(torch.rand(n, generator=g) < 0.3, target, torch.randint(0, CLUSTERS, (n,), generator=g))
    return list(zip(preds.chunk(CHUNKS), target.chunk(CHUNKS)))


def _sklearn(fn, batches):
    def run():
        p = torch.cat([b[0] for b in batches]).numpy()
        t = torch.cat([b[1] for b in batches]).numpy()
        return torch.tensor(fn(t, p), dtype=torch.float64)

    return run


def _extrinsic(name: str, factory, sk_name: str, tm_class: str, with_torchmetrics: bool = True, small=False):
    # tolerance: torchmetrics computes in float32 (its ARI / NMI differ from scikit-learn by ~1e-8)
    @register(f"clustering/{name}", domain="clustering", samples=lambda quick: _n(quick, small), tolerance=1e-6,
              peers=("scikit-learn", "torchmetrics") if with_torchmetrics else ("scikit-learn",),
              description=f"{name} of 10^6 labels, 50 clusters, 10 batches")
    def build(quick: bool, device="cpu"):
        host = _labels(_n(quick, small))  # scikit-learn reads the host copy
        batches = on_device(host, device)
        runs = {"fmetrics": fmetrics_run(factory(), batches)}
        try:
            import sklearn.metrics as skm

            runs["scikit-learn"] = _sklearn(getattr(skm, sk_name), host)
        except ImportError:
            pass
        if with_torchmetrics:
            try:
                import torchmetrics.clustering as tmc

                runs["torchmetrics"] = torchmetrics_run(getattr(tmc, tm_class), batches)
            except ImportError:
                pass
        return runs

    return build


_extrinsic("adjusted_rand_score", fmetrics.adjusted_rand_score, "adjusted_rand_score", "AdjustedRandScore")
_extrinsic("normalized_mutual_info_score", fmetrics.normalized_mutual_info_score, "normalized_mutual_info_score",
           "NormalizedMutualInfoScore")
_extrinsic("adjusted_mutual_info_score", fmetrics.adjusted_mutual_info_score, "adjusted_mutual_info_score",
           "AdjustedMutualInfoScore", with_torchmetrics=False, small=True)  # scikit-learn's expected MI


# torchmetrics' float32 expected mutual information is off by ~1e-4 from scikit-learn's float64 value
@register("clustering/adjusted_mutual_info_score_2000", domain="clustering", samples=2000, tolerance=1e-3,
          full_only="torchmetrics' expected mutual information takes seconds a call",
          peers=("scikit-learn", "torchmetrics"), description="AMI of 2000 labels, 50 clusters")
def ami_small(quick: bool, device="cpu"):
    host = _labels(2000, seed=1)
    batches = on_device(host, device)
    runs = {"fmetrics": fmetrics_run(fmetrics.adjusted_mutual_info_score(), batches)}
    try:
        import sklearn.metrics as skm

        runs["scikit-learn"] = _sklearn(skm.adjusted_mutual_info_score, host)
    except ImportError:
        pass
    try:
        import torchmetrics.clustering as tmc

        runs["torchmetrics"] = torchmetrics_run(tmc.AdjustedMutualInfoScore, batches)
    except ImportError:
        pass
    return runs


@register("nominal/cramers_v_matrix", domain="nominal", samples=_n, tolerance=1e-5, peers=("torchmetrics",),
          description="Cramér's V between the 45 column pairs of a 10^6 x 10 matrix of 5 categories")
def cramers_matrix(quick: bool, device="cpu"):
    g = torch.Generator().manual_seed(2)
    n = _n(quick)
    base = torch.randint(0, 5, (n, 1), generator=g)
    m = torch.where(torch.rand(n, 10, generator=g) < 0.3, base, torch.randint(0, 5, (n, 10), generator=g))
    m = on_device(m, device)
    batches = [(c,) for c in m.chunk(CHUNKS)]
    runs = {"fmetrics": fmetrics_run(fmetrics.cramers_v_matrix(), batches)}
    try:
        from torchmetrics.functional.nominal import cramers_v_matrix

        runs["torchmetrics"] = lambda: cramers_v_matrix(m).double()  # torchmetrics has it as a function only
    except ImportError:
        pass
    return runs
