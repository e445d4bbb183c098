"""``python -m benchmarks [--quick] [--only PATTERN] [--threads N] [--json FILE] [--plot FILE]``."""
from benchmarks.harness import main

raise SystemExit(main())
