"""`native`: the optional C kernels (`fmetrics._native`, built from fmetrics/_native.c), or ``None``.

``None`` where `pip install` found no C compiler, or where the built module is older than the source (a checkout
updated without ``pip install -e .``: then a warning says so once). Callers take their numpy / torch paths when it
is ``None`` (docs/design.md, "The optional C kernels").

Example::

    >>> native is None or native.simd() in ("avx512", "avx2", "c")
    True
"""
from __future__ import annotations

import warnings

VERSION = 3  # _native.c's VERSION: raise both together when a kernel's signature changes or one is added

try:
    from fmetrics import _native as native
except ImportError:
    native = None

if native is not None and getattr(native, "VERSION", None) != VERSION:
    warnings.warn(f"fmetrics._native ({native.__file__}) was built from an older fmetrics/_native.c; fmetrics runs "
                  "without it (slower, same values): rebuild it with `pip install -e .` in the checkout", stacklevel=2)
    native = None
