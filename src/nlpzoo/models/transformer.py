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
(a key/value cache), so each step costs one position, not the whole prefix.

Symbols: B batch, S source positions, T target positions, V vocabulary, C = d_model, h = `heads`,
d_k = C / h, N = `num_layers` (in the encoder and the decoder).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from nlpzoo.data.mt import IGNORE
from nlpzoo.data.vocab import BOS, PAD
from nlpzoo.families import TransformerConfig

Config = TransformerConfig  # the `transformer` params section (nlpzoo.families)


def attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q Kᵀ / √d_k) V (§3.2.1). q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v);
    `mask` boolean, broadcastable to (..., T_q, T_k), True where a query may look (the
    convention of `scaled_dot_product_attention`). Returns (..., T_q, d_v) and the weights."""
    scores = q @ k.transpose(-2, -1)  # (..., T_q, T_k)
    # scaled by 1/√d_k: large dot products would push the softmax into tiny gradients (§3.2.1)
    scores = scores / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)  # (..., T_q, T_k), rows sum to 1
    return weights @ v, weights  # (..., T_q, d_v)


def sinusoidal_positions(length: int, d_model: int) -> torch.Tensor:
    """PE (length, C): PE(pos, 2i) = sin(pos / 10000^{2i/C}), PE(pos, 2i+1) = cos(...) (§3.5)."""
    pos = torch.arange(length, dtype=torch.float64)[:, None]  # (length, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (C/2,)
    angle = pos / 10000.0 ** (two_i / d_model)  # (length, C/2)
    pe = torch.zeros(length, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)
    return pe.float()


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O, written out (§3.2.2)."""

    def __init__(self, d_model: int, heads: int) -> None:
        super().__init__()
        self.heads, self.d_k = heads, d_model // heads
        # the h projections W_j^Q (C × d_k) side by side are one C × C matrix; likewise K, V
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def split(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, C) → (B, h, T, d_k)."""
        B, T, _ = x.shape
        return x.view(B, T, self.heads, self.d_k).transpose(1, 2)

    def keys_values(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """K and V of every head for x (B, T_k, C): two (B, h, T_k, d_k)."""
        return self.split(self.W_k(x)), self.split(self.W_v(x))

    def attend(
        self, x: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Queries from x (B, T_q, C) over given keys/values; mask broadcastable to
        (B, h, T_q, T_k). Returns (B, T_q, C) and the weights (B, h, T_q, T_k)."""
        B, T, C = x.shape
        out, weights = attention(self.split(self.W_q(x)), k, v, mask)  # (B, h, T_q, d_k)
        out = out.transpose(1, 2).reshape(B, T, C)  # Concat(head_1..head_h)
        return self.W_o(out), weights

    def forward(
        self, x: torch.Tensor, memory: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Queries from x (B, T_q, C), keys and values from memory (B, T_k, C)."""
        k, v = self.keys_values(memory)
        return self.attend(x, k, v, mask)


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2 at every position (§3.3)."""

    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.W_1, self.W_2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.W_2(torch.relu(self.W_1(x)))  # (B, T, d_ff) → (B, T, C)


class SubLayer(nn.Module):
    """Residual connection and layer norm around one sub-layer: LN(x + Dropout(f(x))) (§3.1,
    §5.4), or x + Dropout(f(LN(x))) with pre-norm (Xiong et al. 2020; not the paper)."""

    def __init__(self, d_model: int, dropout: float, pre: bool) -> None:
        super().__init__()
        self.norm, self.drop, self.pre = nn.LayerNorm(d_model), nn.Dropout(dropout), pre

    def forward(self, x: torch.Tensor, f) -> tuple[torch.Tensor, torch.Tensor | None]:
        out = f(self.norm(x) if self.pre else x)
        out, weights = out if isinstance(out, tuple) else (out, None)
        y = x + self.drop(out)
        return (y if self.pre else self.norm(y)), weights


class EncoderLayer(nn.Module):
    def __init__(self, c: Config) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(c.d_model, c.heads)
        self.ffn = FeedForward(c.d_model, c.d_ff)
        pre = c.norm == "pre"
        self.sub1 = SubLayer(c.d_model, c.dropout, pre)
        self.sub2 = SubLayer(c.d_model, c.dropout, pre)

    def forward(self, x: torch.Tensor, src_mask: torch.Tensor) -> torch.Tensor:
        """x (B, S, C), src_mask (B, 1, 1, S) True on words → (B, S, C)."""
        x, _ = self.sub1(x, lambda z: self.self_attn(z, z, src_mask))
        x, _ = self.sub2(x, self.ffn)
        return x


class DecoderLayer(nn.Module):
    def __init__(self, c: Config) -> None:
        super().__init__()
        self.self_attn = MultiHeadAttention(c.d_model, c.heads)
        self.cross_attn = MultiHeadAttention(c.d_model, c.heads)
        self.ffn = FeedForward(c.d_model, c.d_ff)
        pre = c.norm == "pre"
        self.sub1 = SubLayer(c.d_model, c.dropout, pre)
        self.sub2 = SubLayer(c.d_model, c.dropout, pre)
        self.sub3 = SubLayer(c.d_model, c.dropout, pre)

    def forward(
        self,
        y: torch.Tensor,
        self_kv: tuple[torch.Tensor, torch.Tensor] | None,
        self_mask: torch.Tensor | None,
        cross_kv: tuple[torch.Tensor, torch.Tensor],
        src_mask: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """y (B, T, C). `self_kv`: cached keys/values of earlier positions (B, h, t, d_k) or None.
        Returns y, the cross-attention weights (B, h, T, S) and the self-attention keys/values
        including these positions (the cache for the next step)."""
        kv = {}

        def masked_self_attention(z: torch.Tensor):
            k, v = self.self_attn.keys_values(z)  # (B, h, T, d_k)
            if self_kv is not None:
                k, v = torch.cat([self_kv[0], k], 2), torch.cat([self_kv[1], v], 2)
            kv["kv"] = (k, v)
            return self.self_attn.attend(z, k, v, self_mask)

        y, _ = self.sub1(y, masked_self_attention)
        y, cross = self.sub2(y, lambda z: self.cross_attn.attend(z, *cross_kv, src_mask))
        y, _ = self.sub3(y, self.ffn)
        return y, cross, kv["kv"]


class Transformer(nn.Module):
    """Encoder–decoder Transformer with one tied embedding matrix."""

    TASK = "mt"
    START = BOS

    def __init__(self, config: Config, vocab_size: int, counts=None) -> None:
        super().__init__()
        self.config = c = config
        self.emb = nn.Embedding(vocab_size, c.d_model, padding_idx=PAD)  # E, (V, C)
        self.register_buffer("pe", sinusoidal_positions(c.max_positions, c.d_model), False)
        self.drop = nn.Dropout(c.dropout)
        self.encoder = nn.ModuleList(EncoderLayer(c) for _ in range(c.num_layers))
        self.decoder = nn.ModuleList(DecoderLayer(c) for _ in range(c.num_layers))
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

    def _cross_kv(self, memory: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [layer.cross_attn.keys_values(memory) for layer in self.decoder]

    def decode_teacher_forced(
        self, src: torch.Tensor, tgt_in: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits (B, T, V) and the last layer's cross-attention weights (B, h, T, S)."""
        memory, src_mask = self.encode(src)
        T = tgt_in.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool, device=src.device).tril()  # (T, T), §3.2.3
        positions = torch.arange(T, device=src.device).expand_as(tgt_in)  # (B, T)
        y = self.embed(tgt_in, positions)
        cross = None
        for layer, kv in zip(self.decoder, self._cross_kv(memory), strict=True):
            y, cross, _ = layer(y, None, causal, kv, src_mask)  # (B, T, C)
        logits = self.dec_norm(y) @ self.emb.weight.T + self.out_bias  # (B, T, V)
        return logits, cross

    def forward(
        self, src: torch.Tensor, tgt_in: torch.Tensor, labels: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """src (B, S), tgt_in (B, T) = <s> y, labels (B, T) = y </s> (−100 ignored).
        Returns logits (B, T, V) and the label-smoothed mean cross-entropy, or None."""
        logits, _ = self.decode_teacher_forced(src, tgt_in)
        if labels is None:
            return logits, None
        loss = F.cross_entropy(
            logits.flatten(0, 1),
            labels.flatten(),
            ignore_index=IGNORE,
            label_smoothing=self.config.label_smoothing,  # ε_ls (§5.4)
        )
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
        """tokens (N,) = y_{t−1} → log p(y_t | ...) (N, V); every earlier position is cached,
        so no mask is needed in the self-attention (the causal mask's row t)."""
        y = self.embed(tokens[:, None], state["pos"])  # (N, 1, C)
        caches = []
        for layer, kv, cache in zip(self.decoder, state["cross"], state["self"], strict=True):
            y, _, new_cache = layer(y, cache, None, kv, state["src_mask"])  # (N, 1, C)
            caches.append(new_cache)
        logits = self.dec_norm(y[:, 0]) @ self.emb.weight.T + self.out_bias  # (N, V)
        new = dict(state, self=caches, pos=state["pos"] + 1)
        return torch.log_softmax(logits, dim=-1), new
