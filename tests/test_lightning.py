"""Lightning: a wrapped metric logged with ``self.log(..., on_epoch=True)`` under
``Trainer(accelerator="cpu", devices=2, strategy="ddp")`` logs the one-process value.

Lightning's "ddp" strategy re-launches the running script for the other
ranks, so `lightning_results` runs in a script in a subprocess (a bounded
timeout turns a hang into a failure): tests/_lightning_ddp.py, the one
Lightning DDP launch of the suite, which also runs the retrieval example and
tests/test_distributed_sharded.py's Lightning job (the ``lightning_ddp``
fixture of tests/conftest.py); rank 0 writes what was logged to JSON. The
same job also validates with Lightning's default sampler
(`DistributedSampler`, which pads 41 rows to 42 by repeating one), to show
the bias that `adapters.distributed.EvalSampler` removes.
"""
import pytest
import torch

N = 41  # odd: DistributedSampler must repeat a row to give 2 ranks equal shards
BATCH = 8


def _data():
    g = torch.Generator().manual_seed(0)
    p = torch.rand(N, generator=g)
    return p, (torch.rand(N, generator=g) < p).long()


def _members():
    import fmetrics as fm

    return {"acc": fm.binary_accuracy(), "auroc": fm.binary_auroc(), "ece": fm.binary_calibration_error(n_bins=5)}


def lightning_results(devices: int) -> dict:
    """What the modules below log on ``devices`` CPU processes (every rank returns its own view)."""
    import lightning as L
    from torch.utils.data import DataLoader, TensorDataset

    import fmetrics as fm
    from adapters import TorchMetric
    from adapters.distributed import EvalSampler

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(1, 1)
            self.auroc = TorchMetric(fm.binary_auroc())
            self.acc = TorchMetric(fm.binary_accuracy())
            self.mean = TorchMetric(fm.mean())

        def validation_step(self, batch, batch_idx):
            p, t = batch
            self.auroc.update(p, t)
            self.acc(p, t)  # forward: the batch value, accumulated for the epoch
            self.mean.update(p)
            self.log("auroc", self.auroc, on_step=False, on_epoch=True)
            self.log("acc", self.acc, on_step=False, on_epoch=True)
            self.log("mean", self.mean, on_step=False, on_epoch=True)

    class CollectionModule(L.LightningModule):
        """`self.log_dict` of a TorchMetric over an fmetrics collection: every member, on step and on epoch."""

        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(1, 1)
            self.metrics = TorchMetric(fm.collection(_members(), prefix="val/"))
            self.last_step = {}

        def validation_step(self, batch, batch_idx):
            p, t = batch
            values = self.metrics(p, t)  # forward: the batch values, accumulated for the epoch
            self.last_step = {k: v.item() for k, v in values.items()}
            self.log_dict(self.metrics, on_step=True, on_epoch=True)

    dataset = TensorDataset(*_data())
    results = {}
    for name, loader, own_sampler in (
        ("exact", DataLoader(dataset, batch_size=BATCH, sampler=EvalSampler(dataset)), True),
        ("padded", DataLoader(dataset, batch_size=BATCH), False),
    ):
        trainer = L.Trainer(accelerator="cpu", devices=devices, strategy="ddp" if devices > 1 else "auto",
                            use_distributed_sampler=not own_sampler, logger=False, enable_checkpointing=False,
                            enable_progress_bar=False, enable_model_summary=False)
        results[name] = trainer.validate(Module(), loader, verbose=False)[0]
    trainer = L.Trainer(accelerator="cpu", devices=devices, strategy="ddp" if devices > 1 else "auto",
                        use_distributed_sampler=False, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    module = CollectionModule()
    epoch = trainer.validate(module, DataLoader(dataset, batch_size=BATCH, sampler=EvalSampler(dataset)),
                             verbose=False)[0]
    results["collection"] = {"epoch": epoch, "last_step": module.last_step,
                             "logged": {k: float(v) for k, v in trainer.logged_metrics.items()}}
    return {"world_size": trainer.world_size, **results}


@pytest.mark.distributed
def test_lightning_ddp_logs_the_one_process_value(lightning_ddp):
    from torchmetrics import MeanMetric
    from torchmetrics.classification import BinaryAccuracy, BinaryAUROC

    logged = lightning_ddp["lightning"]
    assert logged["world_size"] == 2
    p, t = _data()
    want = {"auroc": BinaryAUROC()(p, t).item(), "acc": BinaryAccuracy()(p, t).item(),
            "mean": MeanMetric()(p).item()}
    for k, v in want.items():
        assert logged["exact"][k] == pytest.approx(v, rel=1e-6, abs=1e-7), (k, logged)
    # log_dict of a TorchMetric over a collection: every member on epoch (= one process) and on step
    import fmetrics as fm

    col = fm.collection(_members(), prefix="val/")(p, t)
    got = logged["collection"]
    for k, v in col.items():
        assert got["epoch"][f"{k}_epoch"] == pytest.approx(v.item(), rel=1e-6, abs=1e-7), (k, got)
        assert got["logged"][f"{k}_step"] == pytest.approx(got["last_step"][k], rel=1e-6), (k, got)
    # DistributedSampler repeated a row: the logged mean is biased
    padded_p = torch.cat([p, p[:1]])
    assert logged["padded"]["mean"] == pytest.approx(padded_p.mean().item(), rel=1e-6)
    assert logged["padded"]["mean"] != pytest.approx(want["mean"], rel=1e-6)


# ---------------------------------------------------------------- a fit killed mid-epoch and resumed


class _Crash(Exception):
    pass


def _resume_run(tmp_path, persistent: bool):
    """Epoch values of an uninterrupted fit, and of a fit killed at step 4 and resumed from its step-3 checkpoint."""
    import lightning as L
    from torch.utils.data import DataLoader, TensorDataset

    import fmetrics as fm
    from adapters import TorchMetric

    class Resumable(DataLoader):
        """A loader Lightning can resume mid-epoch: it skips the batches the checkpoint had delivered."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._start = self._served = 0

        def __iter__(self):
            for i, batch in enumerate(super().__iter__()):
                if i < self._start:
                    continue
                self._served = i + 1
                yield batch
            self._start = self._served = 0

        def state_dict(self):
            return {"served": self._served}

        def load_state_dict(self, state):
            self._start = state["served"]

    class Module(L.LightningModule):
        def __init__(self, crash_at=None):
            super().__init__()
            self.layer = torch.nn.Linear(1, 1)
            self.auroc = TorchMetric(fm.binary_auroc(), persistent=persistent)
            self.mean = TorchMetric(fm.mean(), persistent=persistent)
            self.crash_at = crash_at

        def training_step(self, batch, batch_idx):
            if self.global_step == self.crash_at:
                raise _Crash()
            p, t = batch
            self.auroc.update(p, t)
            self.mean.update(p)
            self.log("auroc", self.auroc, on_step=False, on_epoch=True)
            self.log("mean", self.mean, on_step=False, on_epoch=True)
            return (self.layer(p[:, None]) ** 2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.0)

    def trainer(root, **kwargs):
        return L.Trainer(accelerator="cpu", max_epochs=1, logger=False, enable_progress_bar=False,
                         enable_model_summary=False, default_root_dir=str(root), **kwargs)

    def loader():
        return Resumable(TensorDataset(*_data()), batch_size=BATCH)

    t = trainer(tmp_path / "whole", enable_checkpointing=False)
    t.fit(Module(), loader())
    want = {k: float(v) for k, v in t.callback_metrics.items()}
    ckpt = L.pytorch.callbacks.ModelCheckpoint(dirpath=str(tmp_path / "ckpt"), every_n_train_steps=3, save_top_k=-1)
    t = trainer(tmp_path / "killed", callbacks=[ckpt])
    with pytest.raises(_Crash):
        t.fit(Module(crash_at=4), loader())  # dies mid-epoch, after the checkpoint of step 3
    path = sorted((tmp_path / "ckpt").glob("*.ckpt"))[-1]
    t = trainer(tmp_path / "resumed", enable_checkpointing=False)
    t.fit(Module(), loader(), ckpt_path=str(path))
    return want, {k: float(v) for k, v in t.callback_metrics.items()}


@pytest.mark.filterwarnings("ignore")
def test_a_fit_killed_mid_epoch_and_resumed_logs_the_uninterrupted_epoch_value(tmp_path):
    want, got = _resume_run(tmp_path, persistent=True)
    assert set(want) == {"auroc", "mean"}
    assert got == want
    want, lost = _resume_run(tmp_path / "default", persistent=False)  # torchmetrics' default: the state is lost
    assert lost["mean"] != pytest.approx(want["mean"], rel=1e-9)
