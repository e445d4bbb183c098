"""The mutation check (tests/mutations.py) as a slow test: every planted defect must be caught."""
import pytest

from tests import mutations


@pytest.mark.slow
def test_every_mutation_is_caught(capsys):
    code = mutations.main([])
    out = capsys.readouterr().out
    assert code == 0, out


def test_every_mutation_still_applies():
    """Each mutation's snippet occurs exactly once in its file (fast; the slow test runs them)."""
    stale = [m.name for m in mutations.MUTATIONS if (mutations.ROOT / m.path).read_text().count(m.old) != 1]
    assert not stale, f"mutations whose code changed (update them): {stale}"
    assert len(mutations.MUTATIONS) >= 20
    domains = {m.path.split("/")[1] if m.path.startswith("fmetrics/") and m.path.count("/") > 1 else m.path
               for m in mutations.MUTATIONS}
    for domain in ("classification", "regression", "retrieval", "aggregation", "wrappers", "text", "image",
                   "audio", "detection", "segmentation", "clustering", "nominal"):
        assert domain in domains, f"no mutation in fmetrics/{domain}"
