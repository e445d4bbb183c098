"""A custom training/evaluation loop with fmetrics' functional API, on synthetic data.

    python examples/custom_loop.py

Shows the four functions in a plain loop: `init` once per epoch, `update`
per batch (pure, no host sync), `finalize` once at the end. The validation
report is one collection fed once per step from the model's output dict: each
member reads the named outputs it needs (`Metric.from_output`), and accuracy
and F1 over the same logits and labels share one state and one update.
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

    # one Metric for the whole validation report, fed the model's outputs by name once per step
    val_metrics = fm.collection({
        "loss": fm.mean().from_output("loss"),
        "acc": fm.multiclass_accuracy(num_classes=5).from_output("logits", "labels"),
        "f1": fm.multiclass_f1_score(num_classes=5).from_output("logits", "labels"),
        "auroc": fm.multiclass_auroc(num_classes=5).from_output("logits", "labels"),
    }, prefix="val/")
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
                labels = y_val[i : i + batch_size]
                logits = model(x_val[i : i + batch_size])
                outputs = {"loss": loss_fn(logits, labels), "logits": logits, "labels": labels}
                s_val = val_metrics.update(s_val, outputs)
        report = {"train/loss": train_loss.finalize(s_train), **val_metrics.finalize(s_val)}
        print(f"epoch {epoch}: " + "  ".join(f"{k}={v.item():.4f}" for k, v in report.items()))
    return report, model


if __name__ == "__main__":
    main()
