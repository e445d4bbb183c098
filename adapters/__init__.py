"""Adapters: torch.distributed reduction and the torchmetrics wrapper for fmetrics metrics."""
