"""Decoder-only Transformer language model: the blocks of Vaswani et al. (NeurIPS 2017), "Attention
Is All You Need", stacked without an encoder and trained to predict the next token, as in Radford
et al. (2018), "Improving Language Understanding by Generative Pre-Training".

Each position t sees tokens 1..t only (the causal mask) and predicts token t+1:

    x_0 = √d_model · E[w] + PE                           token embedding (§3.4) + positions (§3.5)
    PE(pos, 2i) = sin(pos / 10000^{2i/d_model}),  PE(pos, 2i+1) = cos(pos / 10000^{2i/d_model})
    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k + M) V      M = −∞ above the diagonal (§3.2.1, §3.2.3)
    head_j = Attention(X W_j^Q, X W_j^K, X W_j^V),  MultiHead(X) = Concat(head_1..head_h) W^O
    FFN(x) = max(0, x W_1 + b_1) W_2 + b_2               position-wise, d_model → d_ff → d_model
    post-norm (the paper):  x = LayerNorm(x + Dropout(Sublayer(x)))
    pre-norm (option):      x = x + Dropout(Sublayer(LayerNorm(x))),  one more LayerNorm at the end
    P(w_{t+1} | w_1..w_t) = softmax(x_L Eᵀ + b)          output tied to E (Press & Wolf 2017)

Symbols: B batch, T time (T ≤ `block_size`), V vocabulary, C = d_model, h = `heads`,
d_k = d_v = C / h per head, d_ff the inner size of the FFN, L = `num_layers`.

Training follows the paper's recipe where it is cheap: dropout 0.1 on every sub-layer output and on
the embedding sums (§5.4), Adam with a linear warm-up of `warmup_steps` then 1/√step decay (§5.3;
the shared optimizer reads `warmup_steps`, and `lr` is the peak rate reached at the end of the
warm-up). Not reproduced: Adam's β_2 = 0.98 (the shared optimizer keeps 0.999) and label smoothing
(it would make the perplexity worse, which is what this family is scored on). Pre-norm is the
variant of GPT-2 and Xiong et al. (2020): more stable without warm-up, and not the paper.

Sequences longer than `block_size` must be cut by the caller: the model is not stateful, so each
(B, T) block starts from an empty context.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from nlpzoo.families import TransformerLMConfig

Config = TransformerLMConfig  # the `transformer_lm` params section (nlpzoo.families)


def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None = None,
    scale: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(Q Kᵀ / √d_k) V, §3.2.1. q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v).

    `mask` (T_q, T_k) or broadcastable: boolean, True where a query may attend (as in
    `scaled_dot_product_attention`), or a float added to the scores (−inf to forbid).
    Returns the output (..., T_q, d_v) and the attention weights (..., T_q, T_k).
    """
    scores = q @ k.transpose(-2, -1)  # (..., T_q, T_k)
    if scale:
        # scaled by 1/√d_k so the dot products do not push the softmax into saturation (§3.2.1)
        scores = scores / math.sqrt(q.shape[-1])
    if mask is not None:
        if mask.dtype == torch.bool:
            scores = scores.masked_fill(~mask, float("-inf"))  # (..., T_q, T_k)
        else:
            scores = scores + mask  # (..., T_q, T_k)
    weights = torch.softmax(scores, dim=-1)  # (..., T_q, T_k), rows sum to 1
    return weights @ v, weights  # (..., T_q, d_v), (..., T_q, T_k)


def causal_mask(T: int, device: torch.device | None = None) -> torch.Tensor:
    """(T, T) boolean, True on and below the diagonal: position t attends to 1..t (§3.2.3)."""
    return torch.ones(T, T, dtype=torch.bool, device=device).tril()


def sinusoidal_positions(length: int, d_model: int) -> torch.Tensor:
    """PE (length, d_model): PE(pos, 2i) = sin(pos / 10000^{2i/d}), PE(pos, 2i+1) = cos(..), §3.5"""
    pos = torch.arange(length, dtype=torch.float64)[:, None]  # (length, 1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float64)  # (d/2,) the even dimensions 2i
    angle = pos / 10000.0 ** (two_i / d_model)  # (length, d/2)
    pe = torch.zeros(length, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle)
    return pe.float()


class CausalSelfAttention(nn.Module):
    """MultiHead(X) = Concat(head_1, ..., head_h) W^O with the causal mask (§3.2.2)."""

    def __init__(self, d_model: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.d_k = d_model // heads
        # the h projections W_j^Q (C×d_k) side by side form one C×C matrix; likewise K and V
        self.W_q = nn.Linear(d_model, d_model)
        self.W_k = nn.Linear(d_model, d_model)
        self.W_v = nn.Linear(d_model, d_model)
        self.W_o = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T, C) → (B, T, C)."""
        B, T, C = x.shape
        h, d_k = self.heads, self.d_k
        q = self.W_q(x).view(B, T, h, d_k).transpose(1, 2)  # (B, h, T, d_k)
        k = self.W_k(x).view(B, T, h, d_k).transpose(1, 2)  # (B, h, T, d_k)
        v = self.W_v(x).view(B, T, h, d_k).transpose(1, 2)  # (B, h, T, d_k)
        out, _ = attention(q, k, v, causal_mask(T, x.device))  # (B, h, T, d_k)
        out = out.transpose(1, 2).reshape(B, T, C)  # (B, T, C) = Concat(head_1..head_h)
        return self.W_o(out)  # (B, T, C)


class FeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2, the same at every position (§3.3)."""

    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.W_1 = nn.Linear(d_model, d_ff)
        self.W_2 = nn.Linear(d_ff, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.W_2(torch.relu(self.W_1(x)))  # (B, T, d_ff) → (B, T, C)


class Block(nn.Module):
    """Masked self-attention then FFN, each inside a residual connection and LayerNorm (§3.1)."""

    def __init__(self, config: Config) -> None:
        super().__init__()
        self.attn = CausalSelfAttention(config.d_model, config.heads)
        self.ffn = FeedForward(config.d_model, config.d_ff)
        self.norm1 = nn.LayerNorm(config.d_model)
        self.norm2 = nn.LayerNorm(config.d_model)
        self.drop = nn.Dropout(config.dropout)  # on each sub-layer's output, before the add (§5.4)
        self.pre = config.norm == "pre"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T, C) → (B, T, C)."""
        if self.pre:
            # pre-norm (Xiong et al. 2020): the residual path stays an identity from input to output
            x = x + self.drop(self.attn(self.norm1(x)))  # (B, T, C)
            return x + self.drop(self.ffn(self.norm2(x)))  # (B, T, C)
        # post-norm, the paper's Add & Norm: LayerNorm(x + Sublayer(x))
        x = self.norm1(x + self.drop(self.attn(x)))  # (B, T, C)
        return self.norm2(x + self.drop(self.ffn(x)))  # (B, T, C)


class TransformerLM(nn.Module):
    """Token + position embeddings, L causal Transformer blocks, tied softmax output."""

    INPUT = "stream"  # contiguous (B, T) blocks of the token stream
    STATEFUL = False  # every block starts from an empty context

    def __init__(self, config: Config, vocab_size: int, counts: torch.Tensor | None = None) -> None:
        super().__init__()
        # counts (training frequency per id) are part of the family contract; unused here
        self.config = config
        C, V = config.d_model, vocab_size
        self.tok_emb = nn.Embedding(V, C)  # E, (V, C)
        if config.positions == "sinusoidal":
            self.register_buffer(
                "pe", sinusoidal_positions(config.block_size, C), persistent=False
            )  # (block_size, C), fixed
            self.pos_emb = None
        else:
            self.pos_emb = nn.Embedding(config.block_size, C)  # learned, as in Radford et al. 2018
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.num_layers))
        # pre-norm leaves the last residual sum un-normalised: one more LayerNorm (as in GPT-2)
        self.norm_f = nn.LayerNorm(C) if config.norm == "pre" else nn.Identity()
        self.lm_head = nn.Linear(C, V)  # logits x Eᵀ + b
        # weight tying (Press & Wolf 2017; §3.4 of the paper): the output matrix *is* E
        self.lm_head.weight = self.tok_emb.weight
        self._init_weights()

    def _init_weights(self) -> None:
        # Glorot-uniform projections and zero biases, as in the authors' tensor2tensor code; E with
        # std 1/√C so that √C·E has unit scale, comparable to PE, and the tied logits start small
        for module in self.modules():
            if isinstance(module, nn.Linear) and module is not self.lm_head:
                nn.init.xavier_uniform_(module.weight)
                nn.init.zeros_(module.bias)
        nn.init.normal_(self.tok_emb.weight, std=self.config.d_model**-0.5)
        nn.init.zeros_(self.lm_head.bias)
        if self.pos_emb is not None:
            nn.init.normal_(self.pos_emb.weight, std=0.02)  # Radford et al. 2018: N(0, 0.02)

    def forward(
        self, inputs: torch.Tensor, targets: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """inputs (B, T) ids, targets (B, T) = inputs shifted by one. Returns logits (B, T, V)
        and the mean cross-entropy over the targets (labels −100 ignored), or None."""
        if inputs.shape[1] > self.config.block_size:
            raise ValueError(
                f"sequence length {inputs.shape[1]} exceeds block_size "
                f"{self.config.block_size}; cut the input into blocks of at most block_size tokens"
            )
        B, T = inputs.shape
        # embedding weights multiplied by √d_model (§3.4)
        x = self.tok_emb(inputs) * math.sqrt(self.config.d_model)  # (B, T, C)
        if self.pos_emb is None:
            x = x + self.pe[:T]  # (B, T, C), PE broadcast over the batch
        else:
            x = x + self.pos_emb(torch.arange(T, device=inputs.device))  # (B, T, C)
        x = self.drop(x)  # dropout on the sums of embeddings and positions (§5.4)
        for block in self.blocks:
            x = block(x)  # (B, T, C)
        logits = self.lm_head(self.norm_f(x))  # (B, T, V)
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))
        return logits, loss

    def token_log_probs(self, inputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Natural-log probability of each target, (B, T): exact, normalised over all of V."""
        logits, _ = self.forward(inputs)  # (B, T, V)
        log_p = torch.log_softmax(logits.float(), dim=-1)  # (B, T, V)
        return log_p.gather(-1, targets[..., None]).squeeze(-1)  # (B, T)

    def embeddings(self) -> torch.Tensor:
        """The token embedding E, (V, d_model): input vectors and (tied) output vectors at once."""
        return self.tok_emb.weight.detach()

    def cost_per_token(self, vocab_size: int) -> int:
        """Multiply-adds of one forward pass per token, counting the masked half of attention:

            L · (4 C² + 2 C d_ff + 2 T C) + C V

        4C²: the Q, K, V and W^O projections; 2 C d_ff: the FFN; 2 T C: Q Kᵀ over T = block_size
        keys and the weighted sum of T values (computed densely, then masked); C V: the output
        layer. Layer norms, softmax and the embedding look-up are O(C) or O(T) and left out.
        """
        c = self.config
        C, T = c.d_model, c.block_size
        per_layer = 4 * C * C + 2 * C * c.d_ff + 2 * T * C
        return c.num_layers * per_layer + C * vocab_size
