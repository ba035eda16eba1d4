"""A tiny GPT-2 trained by the Hugging Face Trainer, captured by tracekit (runs on CPU, no download).

    torchrun --nproc_per_node 2 examples/integrations/hf_trainer.py --out-dir tk-trainer
    tracekit analyze tk-trainer

(or ``accelerate launch --multi_gpu --num_processes 2 examples/integrations/hf_trainer.py ...``)
"""

from __future__ import annotations

import argparse
import tempfile

import torch
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments

from tracekit.integrations.transformers import TracekitCallback


class RandomTokens(torch.utils.data.Dataset):
    """Random token sequences, made in memory: ``input_ids`` and ``labels`` alike."""

    def __init__(self, size: int, length: int, vocab: int) -> None:
        generator = torch.Generator().manual_seed(0)
        self.tokens = torch.randint(0, vocab, (size, length), generator=generator)

    def __len__(self) -> int:
        return len(self.tokens)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.tokens[index], "labels": self.tokens[index]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out-dir", default="tk-trainer")
    parser.add_argument("--warmup-steps", type=int, default=2)
    parser.add_argument("--measured-steps", type=int, default=5)
    args = parser.parse_args()

    config = GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=64, vocab_size=512, bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config)
    steps = args.warmup_steps + args.measured_steps
    with tempfile.TemporaryDirectory() as scratch:
        training = TrainingArguments(
            output_dir=scratch,
            use_cpu=True,  # gloo between the ranks that torchrun started
            ddp_find_unused_parameters=False,
            per_device_train_batch_size=4,
            max_steps=steps + 1,
            learning_rate=1e-3,
            logging_steps=1000,  # no logging inside the profiled steps
            save_strategy="no",
            report_to=[],
            disable_tqdm=True,
        )
        callback = TracekitCallback(
            out_dir=args.out_dir,
            warmup_steps=args.warmup_steps,
            measured_steps=args.measured_steps,
            wait=1,
            warmup=1,
            active=args.measured_steps,
        )
        data = RandomTokens(size=4 * 2 * (steps + 1), length=32, vocab=config.vocab_size)
        Trainer(model=model, args=training, train_dataset=data, callbacks=[callback]).train()


if __name__ == "__main__":
    main()
