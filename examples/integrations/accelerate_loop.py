"""A plain training loop on accelerate.Accelerator, captured by tracekit with one call.

    torchrun --nproc_per_node 2 examples/integrations/accelerate_loop.py --out-dir tk-accelerate
    tracekit analyze tk-accelerate

(or ``accelerate launch --multi_gpu --num_processes 2 ...``; on CPU, ``Accelerator(cpu=True)``
runs the ranks as MULTI_CPU on gloo).
"""

from __future__ import annotations

import argparse

import torch
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset

from tracekit.integrations.accelerate import profile


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out-dir", default="tk-accelerate")
    parser.add_argument("--warmup-steps", type=int, default=2)
    parser.add_argument("--measured-steps", type=int, default=5)
    parser.add_argument("--train-steps", type=int, default=10, help="steps trained (profiling covers the first ones)")
    args = parser.parse_args()

    accelerator = Accelerator(cpu=not torch.cuda.is_available())
    generator = torch.Generator().manual_seed(0)
    size = 64 * accelerator.num_processes * args.train_steps
    data = TensorDataset(torch.randn(size, 64, generator=generator), torch.randn(size, 1, generator=generator))
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, optimizer, loader = accelerator.prepare(model, optimizer, DataLoader(data, batch_size=64))

    with profile(
        accelerator,
        out_dir=args.out_dir,
        warmup_steps=args.warmup_steps,
        measured_steps=args.measured_steps,
        wait=1,
        warmup=1,
        active=args.measured_steps,
        samples_per_step=64,
    ) as tk:
        for inputs, targets in tk.loader(loader):
            with tk.phase("forward"):
                loss = torch.nn.functional.mse_loss(model(inputs), targets)
            with tk.phase("backward"):
                accelerator.backward(loss)
            with tk.phase("optim_step"):
                optimizer.step()
            with tk.phase("zero_grad"):
                optimizer.zero_grad()
            tk.step()
    accelerator.end_training()  # the process group down before exit: a live gloo group can abort the exit


if __name__ == "__main__":
    main()
