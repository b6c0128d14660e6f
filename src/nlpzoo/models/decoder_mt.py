"""Decoder-only translation: one causal Transformer reads `<s> source <sep> target </s>` as a
single sequence, the way a language model is fine-tuned on instructions (Radford et al. 2019
cast translation as conditional language modelling; the prompt-masked loss is supervised
fine-tuning's).

    z = <s> x_1 .. x_n <sep> y_1 .. y_m </s>              one sequence, one position table
    p(z_{t+1} | z_≤t) = softmax(Block_L(..Block_1(√C E[z] + PE)) Eᵀ + b)      causal, tied output
    loss = −(1/(m+1)) Σ_{t ≥ n+1} log p(z_{t+1} | z_≤t)   target positions only: the labels of
                                                          x_1 .. x_n, <sep> are −100 (the prompt)

The model still sees the prompt (it is the context of every target position) but is never asked
to predict it, so its capacity goes to translation alone. At inference `<s> x` is run once and
its keys and values cached; generation starts by feeding `<sep>` and then each new token costs
one position. The blocks are those of `transformer_blocks.py`, shared with `transformer_lm` and
`transformer` (Vaswani et al. 2017 §3: multi-head attention scaled by 1/√d_k, Add & Norm, FFN).

Symbols: B batch, S source positions, T target positions, P = S + 1 + T sequence length,
V vocabulary, C = d_model, h = `heads`, d_k = C / h, L = `num_layers`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from nlpzoo.cost import MT_SPAN, Cost
from nlpzoo.data.vocab import BOS, IGNORE, PAD, SEP
from nlpzoo.families.decoder_mt import DecoderMTConfig
from nlpzoo.models.losses import label_smoothed_loss
from nlpzoo.models.transformer_blocks import Block, sinusoidal_positions

Config = DecoderMTConfig  # the `decoder_mt` params section (nlpzoo.families)


def build_sequence(
    src: torch.Tensor, tgt_in: torch.Tensor, labels: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Join each pair into `<s> x <sep> y` with labels masked on the prompt.

    src (B, S) right-padded; tgt_in (B, T) = <s> y; labels (B, T) = y </s>. Row b becomes

        inputs  <s>  x_1 .. x_n  <sep> y_1 .. y_m   <pad> ..      (B, S + 1 + T)
        labels  −100 ..   −100   y_1   .. y_m </s>  −100 ..

    i.e. position n + 1 (the `<sep>`) predicts y_1 and only target tokens carry a label.
    """
    B, S = src.shape
    T = tgt_in.shape[1]
    n = (src != PAD).sum(1, keepdim=True)  # (B, 1) source lengths
    inputs = torch.full((B, S + 1 + T), PAD, dtype=src.dtype, device=src.device)
    inputs[:, 0] = BOS
    inputs[:, 1 : S + 1] = src
    target = tgt_in.clone()
    target[:, 0] = SEP  # the target part starts with <sep> instead of <s>
    cols = n + 1 + torch.arange(T, device=src.device)  # (B, T): where y starts in each row
    inputs.scatter_(1, cols, target)  # overwrites x's padding; the tail stays <pad>
    out_labels = torch.full_like(inputs, IGNORE).scatter_(1, cols, labels)
    return inputs, out_labels


class DecoderMT(nn.Module):
    """Causal Transformer over `<s> source <sep> target`, loss on the target only."""

    START = SEP  # generation starts by feeding <sep> after the cached `<s> source`

    def __init__(self, config: Config, vocab_size: int, counts=None) -> None:
        super().__init__()
        self.config = c = config
        self.emb = nn.Embedding(vocab_size, c.d_model, padding_idx=PAD)  # E, tied to the output
        self.register_buffer("pe", sinusoidal_positions(c.max_positions, c.d_model), False)
        self.drop = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(
            Block(c.d_model, c.heads, c.d_ff, c.dropout, c.norm, causal=True)
            for _ in range(c.num_layers)
        )
        self.norm_f = nn.LayerNorm(c.d_model) if c.norm == "pre" else nn.Identity()
        self.out_bias = nn.Parameter(torch.zeros(vocab_size))
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)
        nn.init.normal_(self.emb.weight, std=c.d_model**-0.5)
        with torch.no_grad():
            self.emb.weight[PAD].zero_()

    def _embed(self, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        if int(positions.max()) >= self.config.max_positions:
            raise ValueError(
                f"sequence position {int(positions.max())} exceeds max_positions "
                f"{self.config.max_positions}; raise max_positions"
            )
        return self.drop(self.emb(ids) * math.sqrt(self.config.d_model) + self.pe[positions])

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(self.norm_f(x), self.emb.weight, self.out_bias)  # tied: x Eᵀ + b, (..., V)

    def _hidden(self, inputs: torch.Tensor) -> torch.Tensor:
        """inputs (B, P) right-padded → the last block's output (B, P, C), before `norm_f`."""
        P = inputs.shape[1]
        x = self._embed(inputs, torch.arange(P, device=inputs.device).expand_as(inputs))
        for block in self.blocks:
            x = block(x)  # (B, P, C), causal
        return x

    def lm_logits(self, inputs: torch.Tensor) -> torch.Tensor:
        """inputs (B, P) right-padded → logits (B, P, V); causal, so padding after a position
        never reaches it."""
        return self._logits(self._hidden(inputs))

    def loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """Mean (label-smoothed) cross-entropy over the labelled (target) positions; −100
        positions add nothing."""
        return label_smoothed_loss(logits, labels, self.config.label_smoothing, IGNORE)

    def forward(
        self, src: torch.Tensor, tgt_in: torch.Tensor, labels: torch.Tensor | None = None
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """The shared translation signature. Returns the logits of the target positions only,
        (B, T, V) aligned with `labels` as for the encoder–decoders, and the prompt-masked loss.

        In training mode with labels the output layer runs on the labelled positions alone
        (the prompt and the padding carry no label, so their logits would reach neither the
        loss nor a gradient): the logits are None and the loss is the same mean."""
        dummy = torch.zeros_like(tgt_in) if labels is None else labels
        inputs, _ = build_sequence(src, tgt_in, dummy)
        x = self._hidden(inputs)  # (B, P, C)
        n = (src != PAD).sum(1, keepdim=True)  # (B, 1)
        cols = n + 1 + torch.arange(tgt_in.shape[1], device=src.device)  # (B, T)
        x = x.gather(1, cols[..., None].expand(-1, -1, x.shape[-1]))  # (B, T, C): <sep> y
        if labels is None:
            return self._logits(x), None
        if self.training:
            real = labels != IGNORE  # (B, T): y </s>, not the padding
            return None, self.loss(self._logits(x[real]), labels[real])  # (N, V) logits
        target_logits = self._logits(x)  # (B, T, V)
        return target_logits, self.loss(target_logits, labels)

    # ---------------------------------------------------------- decoding (evaluation/decoding.py)

    def start(self, src: torch.Tensor) -> dict:
        """Run the prompt `<s> x` once (right-padded, positions 0..n) and cache its keys and
        values; `valid` marks the real prompt positions, `pos` the next position per row."""
        B = src.shape[0]
        prompt = torch.cat([torch.full((B, 1), BOS, dtype=src.dtype, device=src.device), src], 1)
        valid = prompt != PAD  # (B, 1 + S)
        P = prompt.shape[1]
        x = self._embed(prompt, torch.arange(P, device=src.device).expand_as(prompt))
        caches = []
        for block in self.blocks:
            x, cache, _ = block.run(x)  # causal over the prompt
            caches.append(cache)  # K, V (B, h, P, d_k)
        return {"cache": caches, "valid": valid, "pos": valid.sum(1, keepdim=True)}

    def step(self, state: dict, tokens: torch.Tensor) -> tuple[torch.Tensor, dict]:
        """tokens (N,) → log p(next) (N, V). The new position sees the real prompt positions and
        every generated one (prompt padding is masked out)."""
        valid = torch.cat([state["valid"], state["valid"].new_ones(tokens.shape[0], 1)], 1)
        mask = valid[:, None, None, :]  # (N, 1, 1, t + 1)
        x = self._embed(tokens[:, None], state["pos"])  # (N, 1, C)
        caches = []
        for block, cache in zip(self.blocks, state["cache"], strict=True):
            x, cache, _ = block.run(x, mask, cache)
            caches.append(cache)
        log_p = torch.log_softmax(self._logits(x[:, 0]), dim=-1)  # (N, V)
        return log_p, {"cache": caches, "valid": valid, "pos": state["pos"] + 1}

    def cost(self, vocab_size: int) -> Cost:
        """Q per target token: one causal sequence `source <sep> target` runs every position
        through the L blocks, so a target token costs (S+T)/T positions of them (= 2 at
        S = T = `MT_SPAN`), each attending over up to S+T positions; the output layer runs at
        the target positions only."""
        c = self.config
        C, ff, layers, span = c.d_model, c.d_ff, c.num_layers, 2 * MT_SPAN
        per_position = layers * (4 * C * C + 2 * C * ff + 2 * span * C)
        return Cost(
            "(S+T)/T × L×(4C² + 2C×F + 2(S+T)×C) + C×V",
            f"L={layers}, C={C}, F={ff}, S=T={MT_SPAN}, V={vocab_size:,}",
            2 * per_position + C * vocab_size,
        )
