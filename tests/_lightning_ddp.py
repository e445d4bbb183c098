"""One Lightning "ddp" launch (2 CPU processes, gloo) serving every Lightning DDP test of the suite.

    python tests/_lightning_ddp.py OUT.json

Lightning's "ddp" strategy re-launches the running script for rank 1, and
each of those processes spends most of its time importing Lightning (and the
torchmetrics / transformers it pulls in). The suite used to pay that three
times (examples/retrieval_ddp.py, tests/test_lightning.py and
tests/test_distributed_sharded.py each launched their own pair); this script
runs the three jobs one after another in the same pair of processes, in the
same order on both ranks, and rank 0 writes what each logged to OUT.json:

* ``"retrieval_ddp"``: examples/retrieval_ddp.py executed as ``__main__``
  (its code run with ``__name__ == "__main__"``), its stdout (the printed table) and how it exited
  (``None``, or the message it passed to `sys.exit`); a failing check on
  rank 0 is recorded instead of ending rank 0 alone, so rank 1 is not left
  waiting in the next job's collectives.
* ``"lightning"``: `tests.test_lightning.lightning_results`.
* ``"sharded"``: `tests.test_distributed_sharded.lightning_sharded_results`.

The tests read it through the ``lightning_ddp`` fixture of tests/conftest.py,
which runs this script once per test session (across pytest-xdist workers).
"""
import contextlib
import io
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(REPO, "examples", "retrieval_ddp.py")


def _run_example() -> dict:
    sys.path.insert(0, os.path.dirname(EXAMPLE))  # the example imports retrieval_data from beside itself
    out, exit_message = io.StringIO(), None
    try:
        with open(EXAMPLE) as f:
            code = compile(f.read(), EXAMPLE, "exec")
        with contextlib.redirect_stdout(out):
            # as `python examples/retrieval_ddp.py` runs it, but leaving sys.argv[0] (which `runpy.run_path`
            # would point at the example) to this script: Lightning re-launches sys.argv for rank 1
            exec(code, {"__name__": "__main__", "__file__": EXAMPLE, "__builtins__": __builtins__})
    except SystemExit as err:  # the example's own checks failed on this rank
        exit_message = str(err.code) if err.code not in (None, 0) else None
    finally:
        sys.path.remove(os.path.dirname(EXAMPLE))
    return {"stdout": out.getvalue(), "exit": exit_message}


def main(out_path: str) -> None:
    if REPO not in sys.path:
        sys.path.insert(0, REPO)
    results = {"retrieval_ddp": _run_example()}
    from tests.test_distributed_sharded import lightning_sharded_results
    from tests.test_lightning import lightning_results

    results["lightning"] = lightning_results(devices=2)
    results["sharded"] = lightning_sharded_results()
    import torch.distributed as dist

    if dist.get_rank() == 0:
        tmp = out_path + ".part"
        with open(tmp, "w") as f:
            json.dump(results, f)
        os.replace(tmp, out_path)


if __name__ == "__main__":
    main(sys.argv[1])
