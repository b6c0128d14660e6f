"""The Transformer's building blocks, written once for the three families that stack them:
`transformer` (encoder–decoder), `transformer_lm` (decoder-only language model) and `decoder_mt`
(decoder-only translation). Vaswani et al. (NeurIPS 2017), "Attention Is All You Need":

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k + M) V     M = −∞ where a key may not be seen (§3.2.1)
    head_j = Attention(Q W_j^Q, K W_j^K, V W_j^V),  MultiHead = Concat(head_1..head_h) W^O  (§3.2.2)
    PE(pos, 2i) = sin(pos / 10000^{2i/C}),  PE(pos, 2i+1) = cos(pos / 10000^{2i/C})         (§3.5)
    FFN(x) = max(0, x W_1 + b_1) W_2 + b_2                                                  (§3.3)
    post-norm (the paper):  x = LN(x + Dropout(Sublayer(x)))                           (§3.1, §5.4)
    pre-norm (an option):   x = x + Dropout(Sublayer(LN(x)))                    (Xiong et al. 2020)

A `Block` is self-attention, then (in the decoder of an encoder–decoder) cross-attention over the
encoder's output, then the FFN; each sub-layer sits inside a residual connection and a LayerNorm.
In a causal block position t sees positions ≤ t only (the decoder's mask, §3.2.3). Incremental
decoding keeps the keys and values of the positions already seen, a key/value cache: a pair
(K, V) of (B, h, t, d_k) tensors per self-attention, so that each new position costs one
position, not the whole prefix. The cache is a plain tuple, so a decoder's state stays a nest of
tensors whose rows beam search can select.

Symbols: B batch, T new (query) positions, t cached positions, S keys of a memory, V vocabulary,
C = d_model, h = heads, d_k = C / h, d_ff the FFN's inner size.
"""

from __future__ import annotations

import math

import torch
from torch import nn

KV = tuple[torch.Tensor, torch.Tensor]  # keys and values of every head, (B, h, t, d_k) each


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    scale: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q Kᵀ / √d_k) V (§3.2.1). q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v).

    `mask` broadcastable to (..., T_q, T_k): boolean, True where a query may look (the convention
    of `scaled_dot_product_attention`), or a float added to the scores (−inf to forbid).
    Returns the output (..., T_q, d_v) and the attention weights (..., T_q, T_k).
    """
    scores = q @ k.transpose(-2, -1)  # (..., T_q, T_k)
    if scale:
        # scaled by 1/√d_k: large dot products would push the softmax into tiny gradients (§3.2.1)
        scores = scores / math.sqrt(q.shape[-1])
    if mask is not None:
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))
        else:
            scores = scores + mask
    weights = torch.softmax(scores, dim=-1)  # (..., T_q, T_k), rows sum to 1
    return weights @ v, weights  # (..., T_q, d_v), (..., T_q, T_k)


def causal_mask(T: int, device: torch.device | None = None, past: int = 0) -> torch.Tensor:
    """(T, past + T) boolean: query i, at position past + i, may look at key j iff j ≤ past + i
    (§3.2.3). With past = 0 the square lower triangle; with a cache of `past` positions every
    cached key is visible to every new query."""
    return torch.ones(T, past + T, dtype=torch.bool, device=device).tril(past)


def sinusoidal_positions(length: int, d_model: int) -> torch.Tensor:
    """PE (length, C): PE(pos, 2i) = sin(pos / 10000^{2i/C}), PE(pos, 2i+1) = cos(...) (§3.5)."""
    pos = torch.arange(length, dtype=torch.float64)[:, None]  # (length, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (C/2,) the even dimensions 2i
    angle = pos / 10000.0 ** (two_i / d_model)  # (length, C/2)
    pe = torch.zeros(length, d_model, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(angle), torch.cos(angle)
    return pe.float()


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O, written out (§3.2.2).

    `forward` takes queries from x and keys/values from a memory (cross-attention, §3.2.3);
    `self_attention` attends from x over x itself and whatever a key/value cache holds."""

    causal = False  # CausalSelfAttention: self-attention sees no later position

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

    def keys_values(self, x: torch.Tensor) -> KV:
        """K and V of every head for x (B, T_k, C): two (B, h, T_k, d_k)."""
        return self.split(self.W_k(x)), self.split(self.W_v(x))

    def attend(
        self, x: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Queries from x (B, T_q, C) over given keys/values (B, h, T_k, d_k); mask
        broadcastable to (B, h, T_q, T_k). Returns (B, T_q, C) and the weights (B, h, T_q, T_k)."""
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

    def self_attention(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, cache: KV | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, KV]:
        """x (B, T, C) attends over the cached positions and itself. `cache`: K, V (B, h, t, d_k)
        of the earlier positions, or None (t = 0); `mask` boolean, broadcastable to
        (B, h, T, t + T), True where a query may look (a causal module adds its own mask).
        Returns (B, T, C), the weights (B, h, T, t + T) and the cache extended by x's keys and
        values, (B, h, t + T, d_k) each: the cache of the next step."""
        k, v = self.keys_values(x)  # (B, h, T, d_k)
        if cache is not None:
            k, v = torch.cat([cache[0], k], 2), torch.cat([cache[1], v], 2)  # (B, h, t + T, d_k)
        if self.causal:
            T = x.shape[1]
            causal = causal_mask(T, x.device, past=k.shape[2] - T)  # (T, t + T)
            mask = causal if mask is None else mask & causal
        out, weights = self.attend(x, k, v, mask)
        return out, weights, (k, v)


class CausalSelfAttention(MultiHeadAttention):
    """Masked multi-head self-attention (§3.2.3): the query at position t sees keys at positions
    ≤ t only; every cached position is earlier, hence visible."""

    causal = True

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:  # type: ignore[override]
        """x (B, T, C) → (B, T, C), over x itself with the causal mask (and `mask` if given)."""
        return self.self_attention(x, mask)[0]


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, the same at every position (§3.3)."""

    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.W_1, self.W_2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.W_2(torch.relu(self.W_1(x)))  # (B, T, d_ff) → (B, T, C)


class Block(nn.Module):
    """One Transformer layer (§3.1): self-attention (`causal`: masked, as in every decoder), then
    cross-attention over an encoder's output (`cross`: the decoder of an encoder–decoder), then
    the FFN. Each sub-layer f is wrapped as LN(x + Dropout(f(x))) (`norm="post"`, the paper) or
    x + Dropout(f(LN(x))) (`norm="pre"`); dropout on each sub-layer's output (§5.4). The layer
    norms are numbered in sub-layer order: norm1 self-attention, norm2 cross-attention if any,
    the last one (norm2 or norm3) the FFN."""

    def __init__(
        self,
        d_model: int,
        heads: int,
        d_ff: int,
        dropout: float = 0.0,
        norm: str = "post",
        causal: bool = False,
        cross: bool = False,
    ) -> None:
        super().__init__()
        self.attn = (CausalSelfAttention if causal else MultiHeadAttention)(d_model, heads)
        self.cross_attn = MultiHeadAttention(d_model, heads) if cross else None
        self.ffn = FeedForward(d_model, d_ff)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model) if cross else None
        self.drop = nn.Dropout(dropout)
        self.pre = norm == "pre"

    def _in(self, x: torch.Tensor, norm: nn.Module) -> torch.Tensor:
        return norm(x) if self.pre else x  # the sub-layer's input

    def _out(self, x: torch.Tensor, out: torch.Tensor, norm: nn.Module) -> torch.Tensor:
        y = x + self.drop(out)  # residual connection around the sub-layer
        return y if self.pre else norm(y)  # Add & Norm (post) or the bare sum (pre)

    def run(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        cache: KV | None = None,
        cross_kv: KV | None = None,
        cross_mask: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, KV, torch.Tensor | None]:
        """x (B, T, C). `mask`, `cache`: those of `MultiHeadAttention.self_attention`;
        `cross_kv`: K, V (B, h, S, d_k) of the encoder output (from `cross_attn.keys_values`),
        `cross_mask` broadcastable to (B, h, T, S); both only in a `cross` block.
        Returns x (B, T, C), the extended self-attention cache and the cross-attention weights
        (B, h, T, S) (None without cross-attention)."""
        a, _, cache = self.attn.self_attention(self._in(x, self.norm1), mask, cache)
        x = self._out(x, a, self.norm1)
        cross, ffn_norm = None, self.norm2
        if self.cross_attn is not None:
            if cross_kv is None:
                raise ValueError("a cross-attention block needs the encoder's keys and values")
            a, cross = self.cross_attn.attend(self._in(x, self.norm2), *cross_kv, cross_mask)
            x = self._out(x, a, self.norm2)
            ffn_norm = self.norm3
        x = self._out(x, self.ffn(self._in(x, ffn_norm)), ffn_norm)
        return x, cache, cross

    def forward(
        self,
        x: torch.Tensor,
        mask: torch.Tensor | None = None,
        cross_kv: KV | None = None,
        cross_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """x (B, T, C) → (B, T, C), every position at once (no cache)."""
        return self.run(x, mask, None, cross_kv, cross_mask)[0]

    # Earlier names of these parameters: the encoder–decoder's sub-layer wrappers (self_attn,
    # sub{i}.norm) and decoder_mt's FFN written inline (W_1, W_2). A models.pt or checkpoint
    # saved under them still loads; the parameter order was the same, so optimizer states match.
    _RENAMED = (
        ("self_attn.", "attn."),
        ("sub1.norm.", "norm1."),
        ("sub2.norm.", "norm2."),
        ("sub3.norm.", "norm3."),
        ("W_1.", "ffn.W_1."),
        ("W_2.", "ffn.W_2."),
    )

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs) -> None:
        for old, new in self._RENAMED:
            for key in [k for k in state_dict if k.startswith(prefix + old)]:
                state_dict[prefix + new + key[len(prefix + old) :]] = state_dict.pop(key)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
