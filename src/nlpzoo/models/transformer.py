"""Transformer encoder–decoder: Vaswani et al. (NeurIPS 2017), "Attention Is All You Need".

    x_0 = √d_model · E[w] + PE                       embeddings (§3.4) + sinusoidal positions (§3.5)
    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k + M) V  M = −∞ where a key may not be seen (§3.2.1)
    head_j = Attention(Q W_j^Q, K W_j^K, V W_j^V),  MultiHead = Concat(head_1..head_h) W^O  (§3.2.2)
    FFN(x) = max(0, x W_1 + b_1) W_2 + b_2                (§3.3)
    encoder layer:  x = LN(x + SelfAttn(x));  x = LN(x + FFN(x))                     (§3.1)
    decoder layer:  y = LN(y + MaskedSelfAttn(y));  y = LN(y + CrossAttn(y, mem));
                    y = LN(y + FFN(y))                                               (§3.1)
    p(y_t | y_<t, x) = softmax(y_N Eᵀ + b)

Cross-attention takes its queries from the decoder and its keys and values from the encoder
output `mem` (§3.2.3). Masks: source padding in every attention over the source, and the causal
mask in the decoder's self-attention (target padding sits after every real position, so the
causal mask already hides it). One SentencePiece vocabulary serves both languages, so source
embedding, target embedding and the pre-softmax projection are one matrix E (§3.4, after Press &
Wolf 2017). Training: dropout 0.1 on sub-layer outputs and embedding sums (§5.4), label
smoothing ε_ls = 0.1 (§5.4), Adam with β_2 = 0.98 and lr = peak · min(t / warmup, √(warmup / t))
(§5.3; `lr` is the peak).

At inference the encoder runs once; the decoder keeps the keys and values of past positions
(a key/value cache), so each step costs one position, not the whole prefix. Attention, positions,
the FFN and the layers are those of `transformer_blocks.py`, shared with the decoder-only families.

Symbols: B batch, S source positions, T target positions, V vocabulary, C = d_model, h = `heads`,
d_k = C / h, N = `num_layers` (in the encoder and the decoder).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from nlpzoo.cost import MT_SPAN, Cost
from nlpzoo.data.vocab import BOS, IGNORE, PAD
from nlpzoo.families.transformer import TransformerConfig
from nlpzoo.models.losses import label_smoothed_loss
from nlpzoo.models.transformer_blocks import KV, Block, sinusoidal_positions

Config = TransformerConfig  # the `transformer` params section (nlpzoo.families)


class Transformer(nn.Module):
    """Encoder–decoder Transformer with one tied embedding matrix."""

    START = BOS

    def __init__(self, config: Config, vocab_size: int, counts=None) -> None:
        super().__init__()
        self.config = c = config
        self.emb = nn.Embedding(vocab_size, c.d_model, padding_idx=PAD)  # E, (V, C)
        self.register_buffer("pe", sinusoidal_positions(c.max_positions, c.d_model), False)
        self.drop = nn.Dropout(c.dropout)
        sizes = (c.d_model, c.heads, c.d_ff, c.dropout, c.norm)
        self.encoder = nn.ModuleList(Block(*sizes) for _ in range(c.num_layers))
        # decoder layers: masked self-attention, cross-attention over the encoder output, FFN
        self.decoder = nn.ModuleList(
            Block(*sizes, causal=True, cross=True) for _ in range(c.num_layers)
        )
        pre = c.norm == "pre"  # pre-norm leaves the last residual sum unnormalised
        self.enc_norm = nn.LayerNorm(c.d_model) if pre else nn.Identity()
        self.dec_norm = nn.LayerNorm(c.d_model) if pre else nn.Identity()
        self.out_bias = nn.Parameter(torch.zeros(vocab_size))  # logits y Eᵀ + b, E tied (§3.4)
        for m in self.modules():  # Glorot-uniform projections, as in the authors' tensor2tensor
            if isinstance(m, nn.Linear):
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)
        nn.init.normal_(self.emb.weight, std=c.d_model**-0.5)  # √C · E has unit scale
        with torch.no_grad():
            self.emb.weight[PAD].zero_()

    def embed(self, ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """√C · E[ids] + PE[positions]: ids, positions (B, T) → (B, T, C), dropout (§3.4, §5.4)."""
        if int(positions.max()) >= self.config.max_positions:
            raise ValueError(
                f"sequence position {int(positions.max())} exceeds max_positions "
                f"{self.config.max_positions}; raise max_positions"
            )
        return self.drop(self.emb(ids) * math.sqrt(self.config.d_model) + self.pe[positions])

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src (B, S) → memory (B, S, C) and the key mask (B, 1, 1, S), True on words."""
        src_mask = (src != PAD)[:, None, None, :]  # broadcast over heads and queries
        positions = torch.arange(src.shape[1], device=src.device).expand_as(src)  # (B, S)
        x = self.embed(src, positions)
        for layer in self.encoder:
            x = layer(x, src_mask)  # (B, S, C)
        return self.enc_norm(x), src_mask

    def _cross_kv(self, memory: torch.Tensor) -> list[KV]:
        return [layer.cross_attn.keys_values(memory) for layer in self.decoder]

    def _logits(self, y: torch.Tensor) -> torch.Tensor:
        return F.linear(y, self.emb.weight, self.out_bias)  # y Eᵀ + b, tied (§3.4): (..., V)

    def decode_teacher_forced(
        self, src: torch.Tensor, tgt_in: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits (B, T, V) and the last layer's cross-attention weights (B, h, T, S)."""
        y, cross = self._decoder_output(src, tgt_in)
        return self._logits(y), cross

    def _decoder_output(
        self, src: torch.Tensor, tgt_in: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The decoder's normalised output (B, T, C), before the output layer, and the last
        layer's cross-attention weights (B, h, T, S)."""
        memory, src_mask = self.encode(src)
        positions = torch.arange(tgt_in.shape[1], device=src.device).expand_as(tgt_in)  # (B, T)
        y = self.embed(tgt_in, positions)
        cross = None
        for layer, kv in zip(self.decoder, self._cross_kv(memory), strict=True):
            # the layer's self-attention is causal (§3.2.3): position t sees target positions ≤ t
            y, _, cross = layer.run(y, cross_kv=kv, cross_mask=src_mask)  # (B, T, C)
        return self.dec_norm(y), cross

    def forward(
        self, src: torch.Tensor, tgt_in: torch.Tensor, labels: torch.Tensor | None = None
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """src (B, S), tgt_in (B, T) = <s> y, labels (B, T) = y </s> (−100 ignored).
        Returns logits (B, T, V) and the label-smoothed mean cross-entropy, or None. In
        training mode with labels the output layer runs at the labelled positions alone (padding
        reaches neither the loss nor a gradient): the logits are None and the loss is the same
        mean."""
        y, _ = self._decoder_output(src, tgt_in)  # (B, T, C)
        if labels is not None and self.training:
            real = labels != IGNORE  # (B, T)
            logits = self._logits(y[real])  # (N, V), N labelled positions
            return None, label_smoothed_loss(
                logits, labels[real], self.config.label_smoothing, IGNORE
            )
        logits = self._logits(y)  # (B, T, V)
        if labels is None:
            return logits, None
        loss = label_smoothed_loss(logits, labels, self.config.label_smoothing, IGNORE)  # ε_ls
        return logits, loss

    def cross_attention(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Last decoder layer's cross-attention averaged over heads: (B, T, S)."""
        return self.decode_teacher_forced(src, tgt_in)[1].mean(1)

    # ---------------------------------------------------------- decoding (evaluation/decoding.py)

    def start(self, src: torch.Tensor) -> dict:
        """Encoder once; cross-attention keys/values once; empty self-attention caches."""
        memory, src_mask = self.encode(src)
        B = src.shape[0]
        empty = memory.new_zeros(B, self.config.heads, 0, self.config.d_model // self.config.heads)
        return {
            "src_mask": src_mask,  # (B, 1, 1, S)
            "cross": self._cross_kv(memory),  # per layer: K, V (B, h, S, d_k)
            "self": [(empty, empty) for _ in self.decoder],  # per layer: K, V (B, h, t, d_k)
            "pos": torch.zeros(B, 1, dtype=torch.long, device=src.device),  # (B, 1)
        }

    def step(self, state: dict, tokens: torch.Tensor) -> tuple[torch.Tensor, dict]:
        """tokens (N,) = y_{t−1} → log p(y_t | ...) (N, V); every earlier position is cached
        and visible (the causal mask's row t)."""
        y = self.embed(tokens[:, None], state["pos"])  # (N, 1, C)
        caches = []
        for layer, kv, cache in zip(self.decoder, state["cross"], state["self"], strict=True):
            y, new_cache, _ = layer.run(y, None, cache, kv, state["src_mask"])  # (N, 1, C)
            caches.append(new_cache)
        logits = self._logits(self.dec_norm(y[:, 0]))  # (N, V)
        new = dict(state, self=caches, pos=state["pos"] + 1)
        return torch.log_softmax(logits, dim=-1), new

    def cost(self, vocab_size: int) -> Cost:
        """Q per target token, one source token per target token and spans S = T = `MT_SPAN`:
        N encoder layers (4C² + 2C×F + 2S×C), N decoder layers (self- and cross-attention:
        8C² + 2C×F + 2T×C + 2S×C) and the output layer C×V."""
        c = self.config
        C, ff, n, s = c.d_model, c.d_ff, c.num_layers, MT_SPAN
        enc = n * (4 * C * C + 2 * C * ff + 2 * s * C)
        dec = n * (8 * C * C + 2 * C * ff + 2 * s * C + 2 * s * C)
        return Cost(
            "N×(4C² + 2C×F + 2S×C) + N×(8C² + 2C×F + 2T×C + 2S×C) + C×V",
            f"N={n}, C={C}, F={ff}, S=T={s}, V={vocab_size:,}",
            enc + dec + C * vocab_size,
        )
