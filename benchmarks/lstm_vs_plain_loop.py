"""Training throughput of `lstm_lm` through nlpzoo (Lightning) vs a plain PyTorch loop.

Usage: python benchmarks/lstm_vs_plain_loop.py [--steps 300] [--threads 2] [--rounds 2]
The plain loop is the pytorch/examples word-language-model recipe (embedding → LSTM → linear,
`repackage_hidden`, clip, step) with the same sizes, batch and BPTT as params.yaml's `lstm_lm`
and the recipe's tied full softmax on both sides, on the same Brown training stream
(data/vocab/lm, so run `dvc repro vocab@lm` first). Both train for the same number of steps;
tokens/s and their ratio are printed.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch
import yaml
from torch import nn

from nlpzoo.config import build
from nlpzoo.data.lm import BPTTBlocks
from nlpzoo.data.vocab import Vocab, load_stream
from nlpzoo.models.rnn_lm import Config
from nlpzoo.params import TrainerConfig
from nlpzoo.training import FamilyModule, make_trainer

ROOT = Path(__file__).resolve().parents[1]


class PlainLSTM(nn.Module):
    def __init__(self, V: int, d: int, layers: int, dropout: float) -> None:
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(V, d)
        self.rnn = nn.LSTM(d, d, layers, dropout=dropout if layers > 1 else 0.0, batch_first=True)
        self.decoder = nn.Linear(d, V)
        self.decoder.weight = self.encoder.weight  # tied, as in the examples' --tied

    def forward(self, x, hidden):
        out, hidden = self.rnn(self.drop(self.encoder(x)), hidden)
        return self.decoder(self.drop(out)), hidden


def plain_loop(stream, V, cfg: Config, steps: int, clip: float) -> float:
    torch.manual_seed(0)
    model = PlainLSTM(V, cfg.emb_dim, cfg.num_layers, cfg.dropout)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    data = BPTTBlocks(stream, cfg.batch_size, cfg.bptt)
    hidden = None
    model.train()
    t0 = time.perf_counter()
    tokens = 0
    for i in range(steps):
        x, y = data[i % len(data)]
        if hidden is not None:
            hidden = tuple(h.detach() for h in hidden)  # repackage_hidden
        logits, hidden = model(x, hidden)
        loss = nn.functional.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        tokens += y.numel()
    return tokens / (time.perf_counter() - t0)


def nlpzoo_loop(stream, V, cfg: Config, steps: int, clip: float, tmp: Path) -> float:
    from torch.utils.data import DataLoader

    module = FamilyModule("rnn_lm", cfg.__dict__, V, run="bench")
    tcfg = TrainerConfig(
        accelerator="cpu",
        devices=1,
        max_epochs=1,
        max_steps=steps,
        gradient_clip_val=clip,
        early_stopping_patience=0,
    )
    trainer = make_trainer(tcfg, "bench", tmp / "curve.csv", tmp / "ckpt", None, 0, validate=False)
    loader = DataLoader(BPTTBlocks(stream, cfg.batch_size, cfg.bptt), batch_size=None)
    t0 = time.perf_counter()
    trainer.fit(module, loader)
    return steps * cfg.batch_size * cfg.bptt / (time.perf_counter() - t0)


def main() -> None:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    section = {k: v for k, v in params["lstm_lm"].items() if k not in ("trainer", "family")}
    # the recipe's model: a tied full softmax (the run's own output layer may differ: the
    # comparison is of the training loop, on the same network)
    section.update(output="softmax", tie_weights=True)
    cfg = build(Config, section, "lstm_lm")
    clip = params["lstm_lm"].get("trainer", {}).get("gradient_clip_val") or 0.5
    data = ROOT / "data" / "vocab" / "lm"
    stream = load_stream(data, "train")
    V = len(Vocab.load(data / "vocab.txt"))
    # alternate the two, `--rounds` times, and keep each one's best: on a machine with other
    # work the fastest round is the least disturbed, and both get the same conditions
    ours, plain = 0.0, 0.0
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as tmp:
            ours = max(ours, nlpzoo_loop(stream, V, cfg, args.steps, clip, Path(tmp)))
        plain = max(plain, plain_loop(stream, V, cfg, args.steps, clip))
    print(
        f"lstm_lm {cfg.num_layers}x{cfg.hidden_dim}, batch {cfg.batch_size}, bptt {cfg.bptt}, "
        f"{args.steps} steps, {args.threads} threads, best of {args.rounds} alternating rounds; "
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"
    )
    print(f"  plain PyTorch loop   {plain:10,.0f} tokens/s")
    print(f"  nlpzoo (Lightning)   {ours:10,.0f} tokens/s")
    print(f"  ratio nlpzoo/plain   {ours / plain:10.2f}")


if __name__ == "__main__":
    main()
