"""Tiny random stand-ins for the DNSMOS and NISQA networks (same inputs and outputs as the real ones)."""
import torch


class P808(torch.nn.Module):
    """``(N, frames, 120)`` log-mel -> ``(N, 1)``: a frame-wise layer, mean over frames, a linear head."""

    def __init__(self, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.a = torch.nn.Parameter(torch.randn(120, 8, generator=g) / 4)
        self.b = torch.nn.Parameter(torch.randn(8, 1, generator=g))

    def forward(self, x):
        return torch.tanh(x @ self.a).mean(1) @ self.b + 3


class P835(torch.nn.Module):
    """``(N, 144160)`` audio -> ``(N, 3)`` raw (sig, bak, ovr) from 10 ms frames."""

    def __init__(self, seed=1):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.a = torch.nn.Parameter(torch.randn(160, 8, generator=g) / 4)
        self.b = torch.nn.Parameter(torch.randn(8, 3, generator=g))

    def forward(self, x):
        frames = x.reshape(x.shape[0], -1, 160)
        return torch.tanh(4 * frames @ self.a).mean(1) @ self.b + 3


class NISQANet(torch.nn.Module):
    """``(x (N, 1300, 48, 15), n_wins (N,))`` -> ``(N, 5)``: masked mean over the valid segments, linear head."""

    def __init__(self, seed=2):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.a = torch.nn.Parameter(torch.randn(48, 5, generator=g) / 20)
        self.b = torch.nn.Parameter(torch.randn(15, 5, generator=g) / 20)

    def forward(self, x, n_wins):
        valid = torch.arange(x.shape[1], device=x.device) < n_wins[:, None]
        seg = torch.tanh(x.mean(3) @ self.a + x.mean(2) @ self.b)  # (N, 1300, 5)
        return (seg * valid[..., None]).sum(1) / n_wins[:, None] + 3
