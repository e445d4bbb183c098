"""``--plot``: a PNG bar chart of the peer/fmetrics time ratios (log scale).

matplotlib is optional (``pip install matplotlib``); it is
imported only when a plot is asked for.
"""
from __future__ import annotations

from typing import Optional


def unavailable() -> Optional[str]:
    """Why a plot cannot be drawn (matplotlib missing), or None."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "matplotlib is not installed; install it with `pip install matplotlib`"
    return None


def plot(report: dict, path: str) -> None:
    """One horizontal bar per (workload, peer) row that has a ratio; > 1 means fmetrics is faster."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in report["rows"] if r.get("ratio")]
    labels = [f"{r['workload']}  vs {r['peer']}" for r in rows]
    ratios = [r["ratio"] for r in rows]
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.32 * max(len(rows), 1)))
    if rows:
        colors = ["tab:red" if r["status"] == "mismatch" else ("tab:green" if q >= 1 else "tab:orange")
                  for r, q in zip(rows, ratios)]
        y = range(len(rows))
        ax.barh(list(y), [q - 1.0 for q in ratios], left=1.0, color=colors)  # bars grow from 1x
        ax.set_yticks(list(y), labels, fontsize=8)
        ax.invert_yaxis()
        for i, q in enumerate(ratios):
            ax.annotate(f"{q:.2f}x" if q < 10 else f"{q:.0f}x", (q, i), xytext=(3 if q >= 1 else -3, 0),
                        textcoords="offset points", va="center", ha="left" if q >= 1 else "right", fontsize=7)
        lo, hi = min(ratios + [1.0]) / 2, max(ratios + [1.0]) * 3
        ax.set_xscale("log")
        ax.set_xlim(lo, hi)
        ticks = [m * 10.0**e for e in range(-4, 5) for m in (1, 2, 5) if lo <= m * 10.0**e <= hi]
        ax.set_xticks(ticks, [f"{t:g}x" for t in ticks])
        ax.minorticks_off()
    ax.axvline(1.0, color="black", linewidth=0.8)
    m = report["machine"]
    ax.set_xlabel("peer time / fmetrics time, log scale (> 1: fmetrics is faster; red: values disagree)", fontsize=8)
    threads = f"{m['threads']} thread" + ("s" if m["threads"] != 1 else "")
    ax.set_title(f"fmetrics benchmarks ({'quick' if report['quick'] else 'full'} run, {report['date'][:10]}, "
                 f"{threads}, {m['cpu']})", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
