"""A tiny MLP trained by Lightning's DDP strategy on 2 CPU processes, captured by tracekit.

    python examples/integrations/lightning_ddp.py --out-dir tk-lightning
    tracekit analyze tk-lightning

Lightning starts the second process itself (``strategy="ddp"``, ``devices=2``, gloo on CPU).
"""

from __future__ import annotations

import argparse

import lightning
import torch
from torch.utils.data import DataLoader, TensorDataset

from tracekit.integrations.lightning import TracekitCallback


class Regression(lightning.LightningModule):
    """An MLP regressing random targets."""

    def __init__(self, width: int = 256) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(64, width), torch.nn.ReLU(), torch.nn.Linear(width, width), torch.nn.ReLU(),
            torch.nn.Linear(width, 1),
        )  # fmt: skip

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        inputs, targets = batch
        return torch.nn.functional.mse_loss(self.net(inputs), targets)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out-dir", default="tk-lightning")
    parser.add_argument("--warmup-steps", type=int, default=2)
    parser.add_argument("--measured-steps", type=int, default=5)
    args = parser.parse_args()

    steps = args.warmup_steps + args.measured_steps
    generator = torch.Generator().manual_seed(0)
    data = TensorDataset(
        torch.randn(64 * 2 * (steps + 1), 64, generator=generator), torch.randn(64 * 2 * (steps + 1), 1)
    )
    callback = TracekitCallback(
        out_dir=args.out_dir,
        warmup_steps=args.warmup_steps,
        measured_steps=args.measured_steps,
        wait=1,
        warmup=1,
        active=args.measured_steps,
    )
    trainer = lightning.Trainer(
        accelerator="cpu",
        strategy="ddp",
        devices=2,
        max_steps=steps + 1,
        callbacks=[callback],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(Regression(), DataLoader(data, batch_size=64))


if __name__ == "__main__":
    main()
