"""The law suite on the image cases alone, both seeds with every law, plus the cases too large for the default
run (`SLOW_CASES`: e.g. MS-SSIM's default 11-tap window needs sides >= 161). All marked slow: the default run
checks `CASES` in tests/test_laws.py, with every domain (the compile laws on the first seed)."""
import pytest

from fmetrics.testing import LAWS, check_metric
from tests.cases.image import CASES, SLOW_CASES

PARAMS = [pytest.param(c, id=c.id, marks=pytest.mark.slow) for c in CASES + SLOW_CASES]


@pytest.mark.parametrize("case", PARAMS)
def test_image_laws(case):
    options = dict(case.check)
    skipped = set(LAWS) - set(options.get("laws", LAWS))
    assert not skipped or case.why, f"{case.id}: laws {sorted(skipped)} skipped without a reason"
    for seed in (0, 1):
        check_metric(case.make(), case.batches(seed), reference=case.reference, seed=seed, **options)
