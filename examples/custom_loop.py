"""A custom training/evaluation loop with fmetrics' functional API, on synthetic data.

    python examples/custom_loop.py

Shows the four functions in a plain loop: `init` once per epoch, `update`
per batch (pure, no host sync), `finalize` once at the end.
"""
import torch

import fmetrics as fm


def make_data(n=4096, dim=16, num_classes=5, seed=0):
    centers = torch.randn(num_classes, dim, generator=torch.Generator().manual_seed(1234)) * 0.7
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, num_classes, (n,), generator=g)
    x = centers[y] + torch.randn(n, dim, generator=g)
    return x, y


def main(epochs=3, batch_size=256):
    torch.manual_seed(0)
    x, y = make_data()
    x_val, y_val = make_data(seed=1)
    model = torch.nn.Linear(x.shape[1], 5)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss_fn = torch.nn.CrossEntropyLoss(reduction="none")

    # one Metric for the whole validation report: loss mean plus the hottest-class maximum logit
    val_metrics = fm.collection({"loss": fm.mean(), "max_logit": fm.max()}, prefix="val/")
    train_loss = fm.mean()

    for epoch in range(epochs):
        s_train = train_loss.init()
        for i in range(0, len(x), batch_size):
            logits = model(x[i : i + batch_size])
            loss = loss_fn(logits, y[i : i + batch_size])
            opt.zero_grad()
            loss.mean().backward()
            opt.step()
            s_train = train_loss.update(s_train, loss.detach())  # per-sample losses: no mean of means

        s_val = val_metrics.init()
        with torch.no_grad():
            for i in range(0, len(x_val), batch_size):
                logits = model(x_val[i : i + batch_size])
                s_val = val_metrics.update(s_val, loss_fn(logits, y_val[i : i + batch_size]))
        report = {"train/loss": train_loss.finalize(s_train), **val_metrics.finalize(s_val)}
        print(f"epoch {epoch}: " + "  ".join(f"{k}={v.item():.4f}" for k, v in report.items()))
    return report


if __name__ == "__main__":
    main()
