"""Validating a ranker on two retrieval datasets with Lightning DDP on 2 CPU processes.

    python examples/retrieval_ddp.py

A LightningModule scores (query, document) rows. It has two validation
dataloaders, "web" and "news", each with its own NDCG@10 and MAP: fmetrics
metrics wrapped as torchmetrics metrics by `adapters.TorchMetric`. A query's
rows are scattered over batches and over the two ranks; each rank only
appends its rows to the state, and at epoch end the wrapper's sync
(`adapters.distributed.reduce`) joins every rank's rows before the metric
groups them by query. The exact `EvalSampler` shards the validation rows with
no padding, so no row is counted twice. The script then recomputes both
metrics in one process on the whole data and prints them side by side with an
independent check, torchmetrics' single-process value on the same data (and,
for contrast, the mean of per-rank values, which is not the same number).

Strategy: Lightning's "ddp" (it re-launches this script for rank 1), with the
gloo backend on CPU.
"""
import sys
import warnings

import lightning as L
import torch
from torch.utils.data import DataLoader, DistributedSampler

import fmetrics as fm
from adapters import TorchMetric
from adapters.distributed import EvalSampler

from retrieval_data import DATASETS, FEATURES, make_rows  # the module beside this script


class Ranker(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.scorer = torch.nn.Linear(FEATURES, 1)
        self.names = list(DATASETS)
        self.data = {name: make_rows(*DATASETS[name]) for name in self.names}
        self.train_rows = make_rows(1000, 13)
        # one NDCG@10 and one MAP per validation dataset
        self.val_metrics = torch.nn.ModuleDict({
            name: torch.nn.ModuleDict({
                "ndcg@10": TorchMetric(fm.retrieval_normalized_dcg(top_k=10)),
                "map": TorchMetric(fm.retrieval_map()),
            })
            for name in self.names
        })

    def forward(self, x):
        # positive scores: MAP treats scores <= 0 as "not retrieved" (torchmetrics' rule)
        return torch.sigmoid(self.scorer(x).squeeze(-1))

    def training_step(self, batch, batch_idx):
        x, relevance, _ = batch
        return torch.nn.functional.mse_loss(self.scorer(x).squeeze(-1), relevance.float())

    def validation_step(self, batch, batch_idx, dataloader_idx=0):
        x, relevance, query = batch
        name = self.names[dataloader_idx]
        scores = self(x)
        ndcg, map_ = self.val_metrics[name]["ndcg@10"], self.val_metrics[name]["map"]
        ndcg.update(scores, relevance, query)
        map_.update(scores, (relevance > 0).long(), query)
        # logging the metric objects: Lightning calls compute() (which syncs the ranks) at epoch end
        self.log(f"val/{name}/ndcg@10", ndcg, add_dataloader_idx=False)
        self.log(f"val/{name}/map", map_, add_dataloader_idx=False)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)

    def train_dataloader(self):
        return DataLoader(self.train_rows, batch_size=64, sampler=DistributedSampler(self.train_rows, seed=0))

    def val_dataloader(self):
        return [DataLoader(self.data[name], batch_size=128, sampler=EvalSampler(self.data[name]))
                for name in self.names]


def _values(model: Ranker, name: str, rows) -> dict:
    x, relevance, query = rows
    scores = model(x)
    return {f"val/{name}/ndcg@10": fm.retrieval_normalized_dcg(top_k=10)(scores, relevance, query),
            f"val/{name}/map": fm.retrieval_map()(scores, (relevance > 0).long(), query)}


def _torchmetrics_values(model: Ranker, name: str, rows) -> dict:
    from torchmetrics.retrieval import RetrievalMAP, RetrievalNormalizedDCG

    x, relevance, query = rows
    scores = model(x)
    # sync_on_compute=False: this runs on rank 0 alone after training, on all the rows
    ndcg = RetrievalNormalizedDCG(top_k=10, sync_on_compute=False)
    mean_ap = RetrievalMAP(sync_on_compute=False)
    ndcg.update(scores, relevance, indexes=query)
    mean_ap.update(scores, relevance > 0, indexes=query)
    return {f"val/{name}/ndcg@10": ndcg.compute(), f"val/{name}/map": mean_ap.compute()}


@torch.no_grad()
def torchmetrics_values(model: Ranker) -> dict:
    """The same metrics computed by torchmetrics in one process on all rows: an independent check."""
    out = {}
    for name, rows in model.data.items():
        out.update(_torchmetrics_values(model, name, rows.tensors))
    return out


@torch.no_grad()
def single_process_values(model: Ranker) -> tuple[dict, dict]:
    """NDCG@10 and MAP of each dataset in one process on all rows (the functional API), and, for
    contrast, the mean of the two ranks' values on their own shards (what per-rank averaging gives)."""
    whole, naive = {}, {}
    for name, rows in model.data.items():
        whole.update(_values(model, name, rows.tensors))
        shards = [_values(model, name, rows[list(EvalSampler(rows, num_replicas=2, rank=r))]) for r in (0, 1)]
        naive.update({k: (shards[0][k] + shards[1][k]) / 2 for k in shards[0]})
    return whole, naive


def main() -> dict:
    warnings.filterwarnings("ignore", ".*(num_workers|does not have many workers|sync_dist).*")
    torch.manual_seed(0)
    model = Ranker()
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=1, num_sanity_val_steps=0,
                        use_distributed_sampler=False, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(model)
    if not trainer.is_global_zero:
        return {}
    logged = {k: v for k, v in trainer.callback_metrics.items() if k.startswith("val/")}
    reference, naive = single_process_values(model.eval())
    peer = torchmetrics_values(model)
    print(f"{'metric':<20} {'DDP, 2 ranks':>14} {'1 process':>14} {'mean of ranks':>14} {'torchmetrics':>14}")
    worst = worst_peer = 0.0
    for key, value in reference.items():
        worst = max(worst, abs(float(logged[key]) - float(value)))
        worst_peer = max(worst_peer, abs(float(peer[key]) - float(value)))
        print(f"{key:<20} {float(logged[key]):>14.8f} {float(value):>14.8f} {float(naive[key]):>14.8f} "
              f"{float(peer[key]):>14.8f}")
    print(f"largest difference: {worst:.2e} (DDP vs 1 process), {worst_peer:.2e} (torchmetrics vs 1 process)")
    if worst > 1e-6:
        sys.exit("DDP values differ from the single-process values")
    if worst_peer > 1e-5:
        sys.exit("torchmetrics' single-process values differ from fmetrics'")
    return {k: (float(logged[k]), float(v)) for k, v in reference.items()}


if __name__ == "__main__":
    main()
