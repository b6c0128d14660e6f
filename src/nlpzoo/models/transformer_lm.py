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

or, with `output: adaptive` (or hierarchical), an output layer of its own over x_L
(models/outputs.py): the adaptive softmax of Grave et al. (2017), the output Baevski & Auli
(ICLR 2019) give Transformer LMs over large vocabularies. Its probabilities are as exact and
normalised as the softmax's, at about C×(c_0 + tails) multiply-adds per token instead of C×V.

Symbols: B batch, T time (T ≤ `block_size`), V vocabulary, C = d_model, h = `heads`,
d_k = d_v = C / h per head, d_ff the inner size of the FFN, L = `num_layers`.

Training follows the paper's recipe where it is cheap: dropout 0.1 on every sub-layer output and on
the embedding sums (§5.4), Adam with a linear warm-up of `warmup_steps` then 1/√step decay (§5.3;
the shared optimizer reads `warmup_steps`, and `lr` is the peak rate reached at the end of the
warm-up). Not reproduced: Adam's β_2 = 0.98 (the shared optimizer keeps 0.999) and label smoothing
(it would make the perplexity worse, which is what this family is scored on). Pre-norm is the
variant of GPT-2 and Xiong et al. (2020): more stable without warm-up, and not the paper.

Sequences longer than `block_size` must be cut by the caller: the model is not stateful, so each
(B, T) block starts from an empty context. `decode` runs the same blocks a few positions at a time
over a key/value cache (generation: one new position per token). Attention, positions, the FFN and
the block are those of `transformer_blocks.py`, shared with the translation Transformers.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from nlpzoo.cost import Cost, output_term
from nlpzoo.errors import ConfigError
from nlpzoo.families.transformer_lm import TransformerLMConfig
from nlpzoo.models.losses import label_smoothed_loss
from nlpzoo.models.outputs import check_cutoffs, make_output
from nlpzoo.models.transformer_blocks import KV, Block, sinusoidal_positions

Config = TransformerLMConfig  # the `transformer_lm` params section (nlpzoo.families)


class TransformerLM(nn.Module):
    """Token + position embeddings, L causal Transformer blocks, then the tied softmax (or an
    adaptive or hierarchical output layer)."""

    def __init__(self, config: Config, vocab_size: int, counts: torch.Tensor | None = None) -> None:
        super().__init__()
        # counts (training frequency per id): the Huffman tree of the hierarchical output and the
        # adaptive output's expected cost
        self.config = config
        C, V = config.d_model, vocab_size
        if config.output == "adaptive":
            try:
                check_cutoffs(config.cutoffs, V)
            except ValueError as e:
                raise ConfigError(f"key 'cutoffs': {e}") from None
        if config.output == "hierarchical" and counts is None:
            raise ConfigError(
                "key 'output' hierarchical builds a Huffman tree from the training count of "
                "every word: construct the model with counts="
            )
        self.tok_emb = nn.Embedding(V, C)  # E, (V, C)
        if config.positions == "sinusoidal":
            self.register_buffer(
                "pe", sinusoidal_positions(config.block_size, C), persistent=False
            )  # (block_size, C), fixed
            self.pos_emb = None
        else:
            self.pos_emb = nn.Embedding(config.block_size, C)  # learned, as in Radford et al. 2018
        self.drop = nn.Dropout(config.dropout)
        # masked self-attention then FFN, each with residual and LayerNorm (§3.1)
        c = config
        self.blocks = nn.ModuleList(
            Block(C, c.heads, c.d_ff, c.dropout, c.norm, causal=True) for _ in range(c.num_layers)
        )
        # pre-norm leaves the last residual sum un-normalised: one more LayerNorm (as in GPT-2)
        self.norm_f = nn.LayerNorm(C) if config.norm == "pre" else nn.Identity()
        self.softmax = config.output == "softmax"
        if self.softmax:
            self.lm_head = nn.Linear(C, V)  # logits x Eᵀ + b
            # weight tying (Press & Wolf 2017; §3.4 of the paper): the output matrix *is* E
            self.lm_head.weight = self.tok_emb.weight
            self.out = None
        else:
            self.lm_head = None
            c = config
            self.out = make_output(c.output, C, V, counts, c.cutoffs, c.div_value)
        self._init_weights()

    def _init_weights(self) -> None:
        # Glorot-uniform projections and zero biases, as in the authors' tensor2tensor code; E with
        # std 1/√C so that √C·E has unit scale, comparable to PE, and the tied logits start small
        for module in self.modules():
            if isinstance(module, nn.Linear) and module is not self.lm_head:
                nn.init.xavier_uniform_(module.weight)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        nn.init.normal_(self.tok_emb.weight, std=self.config.d_model**-0.5)
        if self.lm_head is not None:
            nn.init.zeros_(self.lm_head.bias)
        if self.pos_emb is not None:
            nn.init.normal_(self.pos_emb.weight, std=0.02)  # Radford et al. 2018: N(0, 0.02)

    def forward(
        self, inputs: torch.Tensor, targets: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """inputs (B, T) ids, targets (B, T) = inputs shifted by one. Returns logits (B, T, V)
        and the mean cross-entropy over the targets (labels −100 ignored), or None. The adaptive
        and hierarchical outputs never form the V scores: their logits are None and the loss is
        the mean of −log p(target) they give (the loader's targets are all real tokens)."""
        x = self.norm_f(self._hidden(inputs))  # (B, T, C)
        if not self.softmax:
            if targets is None:
                raise ValueError(f"output '{self.config.output}' forms no logits: pass targets")
            return None, -self.out.log_prob(x.reshape(-1, x.shape[-1]), targets.reshape(-1)).mean()
        logits = self.lm_head(x)  # (B, T, V)
        if targets is None:
            return logits, None
        return logits, label_smoothed_loss(logits, targets, smoothing=0.0)  # plain cross-entropy

    def _hidden(self, inputs: torch.Tensor) -> torch.Tensor:
        """The last block's output at every position, (B, T, C)."""
        if inputs.shape[1] > self.config.block_size:
            raise ValueError(
                f"sequence length {inputs.shape[1]} exceeds block_size "
                f"{self.config.block_size}; cut the input into blocks of at most block_size tokens"
            )
        x = self._embed(inputs)  # (B, T, C)
        for block in self.blocks:
            x = block(x)  # (B, T, C)
        return x

    def _embed(self, inputs: torch.Tensor, past: int = 0) -> torch.Tensor:
        """√d_model · E[w] + the positions past..past+T-1, with dropout (§3.4, §3.5, §5.4)."""
        T = inputs.shape[1]
        x = self.tok_emb(inputs) * math.sqrt(self.config.d_model)  # (B, T, C)
        if self.pos_emb is None:
            x = x + self.pe[past : past + T]  # (B, T, C), PE broadcast over the batch
        else:
            x = x + self.pos_emb(torch.arange(past, past + T, device=inputs.device))  # (B, T, C)
        return self.drop(x)  # dropout on the sums of embeddings and positions (§5.4)

    def decode(
        self, inputs: torch.Tensor, cache: list[KV] | None = None
    ) -> tuple[torch.Tensor, list[KV]]:
        """Incremental decoding with a key/value cache: `inputs` (B, T) continue the t positions
        `cache` holds (None: none; a (K, V) pair per block, (B, h, t, d_k) each), so each new
        position costs one position, not the prefix. Returns log p(· | prefix) after each input,
        (B, T, V) float32, and the cache extended by the inputs. t + T must not exceed
        block_size (the positions the model was trained on)."""
        past = 0 if cache is None else cache[0][0].shape[2]
        if past + inputs.shape[1] > self.config.block_size:
            raise ValueError(
                f"{past} cached + {inputs.shape[1]} new positions exceed block_size "
                f"{self.config.block_size}"
            )
        x = self._embed(inputs, past)  # (B, T, C)
        extended = []
        for i, block in enumerate(self.blocks):
            x, kv, _ = block.run(x, None, None if cache is None else cache[i])  # causal
            extended.append(kv)
        return self._log_prob_all(self.norm_f(x)), extended

    def token_log_probs(
        self, inputs: torch.Tensor, targets: torch.Tensor, start: int = 0
    ) -> torch.Tensor:
        """Natural-log probability of each target from position `start` on, (B, T − start):
        exact, normalised over all of V. Every position still attends to the whole window; only
        the output layer, most of the model's work, is skipped before `start` (a sliding
        evaluation scores only a window's last positions)."""
        x = self.norm_f(self._hidden(inputs)[:, start:])  # (B, T − start, C)
        if not self.softmax:
            y = targets[:, start:]  # (B, T − start)
            lp = self.out.log_prob(x.reshape(-1, x.shape[-1]), y.reshape(-1))  # (B·(T − start),)
            return lp.float().view(y.shape)
        logits = self.lm_head(x)  # (B, T − start, V)
        log_p = torch.log_softmax(logits.float(), dim=-1)  # (B, T − start, V)
        return log_p.gather(-1, targets[:, start:, None]).squeeze(-1)  # (B, T − start)

    def _log_prob_all(self, x: torch.Tensor) -> torch.Tensor:
        """log p(· | x) over all of V, float32: (B, T, C) → (B, T, V)."""
        if self.softmax:
            return torch.log_softmax(self.lm_head(x).float(), dim=-1)
        lp = self.out.log_prob_all(x.reshape(-1, x.shape[-1])).float()
        return lp.view(*x.shape[:-1], -1)

    def embeddings(self) -> torch.Tensor:
        """The token embedding E, (V, d_model): the input vectors (and, tied, the output ones)."""
        return self.tok_emb.weight.detach()

    def cost(self, vocab_size: int) -> Cost:
        """Q = L×(4C² + 2C×F + 2T×C) + the output term (C×V for the softmax) with this run's
        sizes."""
        c = self.config
        C, ff, L, T = c.d_model, c.d_ff, c.num_layers, c.block_size
        counted = self.out.num_ops_per_token() if c.output == "adaptive" else None
        last, symbol = output_term(C, "C", c.output, vocab_size, counted)
        blocks = L * (4 * C * C + 2 * C * ff + 2 * T * C)
        return Cost(
            f"L×(4C² + 2C×F + 2T×C) + {symbol}",
            f"L={L}, C={C}, F={ff}, T={T}, V={vocab_size:,}",
            None if last is None else blocks + last,
        )
