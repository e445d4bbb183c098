"""The law suite on the image cases alone (tests/test_laws.py runs them too, with every domain)."""
import pytest

from fmetrics.testing import LAWS, check_metric
from tests.cases.image import CASES


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_image_laws(case):
    options = dict(case.check)
    skipped = set(LAWS) - set(options.get("laws", LAWS))
    assert not skipped or case.why, f"{case.id}: laws {sorted(skipped)} skipped without a reason"
    for seed in (0, 1):
        check_metric(case.make(), case.batches(seed), reference=case.reference, seed=seed, **options)
