"""The law suite on the image cases alone (tests/test_laws.py runs them too, with every domain), plus the
cases too large for the default run (`SLOW_CASES`, marked slow: e.g. MS-SSIM's default 11-tap window needs
sides >= 161)."""
import pytest

from fmetrics.testing import LAWS, check_metric
from tests.cases.image import CASES, SLOW_CASES

PARAMS = [pytest.param(c, id=c.id) for c in CASES] + [pytest.param(c, id=c.id, marks=pytest.mark.slow)
                                                      for c in SLOW_CASES]


@pytest.mark.parametrize("case", PARAMS)
def test_image_laws(case):
    options = dict(case.check)
    skipped = set(LAWS) - set(options.get("laws", LAWS))
    assert not skipped or case.why, f"{case.id}: laws {sorted(skipped)} skipped without a reason"
    for seed in (0, 1):
        check_metric(case.make(), case.batches(seed), reference=case.reference, seed=seed, **options)
