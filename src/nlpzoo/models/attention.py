"""RNN encoder–decoder with additive attention: Bahdanau, Cho & Bengio (ICLR 2015), "Neural Machine
Translation by Jointly Learning to Align and Translate" (RNNsearch).

The encoder no longer squeezes the sentence into one vector: a bidirectional RNN gives one
annotation per source word, and the decoder looks back at all of them at every step (§3, App. A):

    h_j = [→h_j ; ←h_j]                         annotation of word j, (2H)
    s_0 = tanh(W_s ←h_1)                        the backward RNN's final state (App. A.2.2)
    e_ij = v_aᵀ tanh(W_a s_{i−1} + U_a h_j)     alignment model, additive score (eq. 6)
    α_ij = exp(e_ij) / Σ_k exp(e_ik)            over source positions, padding masked (eq. 6)
    c_i = Σ_j α_ij h_j                          context vector (eq. 5)
    s_i = RNN([E y_{i−1} ; c_i], s_{i−1})       decoder state (eq. 4)
    t_i = W_t [E y_{i−1} ; s_i ; c_i]           deep output (App. A.2.2 uses s_{i−1})
    t_i ← max(t_{i,2k−1}, t_{i,2k})   (maxout, optional)
    p(y_i | y_<i, x) = softmax(W_o t_i)

U_a h_j does not depend on i and is computed once per sentence. Paper sizes: 1000 hidden units per
direction, 620-dimensional embeddings, 1000 alignment units, maxout of 500, Adadelta.

Symbols: B batch, S source positions, T target positions, V vocabulary, E = `emb_dim`,
H = `hidden_dim` (per encoder direction and for the decoder), A = `attn_dim`.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nlpzoo.cost import MT_SPAN, Cost
from nlpzoo.data.vocab import BOS, IGNORE, PAD
from nlpzoo.families.attention import AttentionConfig
from nlpzoo.models.losses import label_smoothed_loss

Config = AttentionConfig  # the `attention` params section (nlpzoo.families)


class AdditiveAttention(nn.Module):
    """e_ij = v_aᵀ tanh(W_a s_{i−1} + U_a h_j), α = masked softmax over j, c_i = Σ_j α_ij h_j."""

    def __init__(self, state_dim: int, annotation_dim: int, attn_dim: int) -> None:
        super().__init__()
        self.W_a = nn.Linear(state_dim, attn_dim, bias=False)
        self.U_a = nn.Linear(annotation_dim, attn_dim)
        self.v_a = nn.Linear(attn_dim, 1, bias=False)

    def keys(self, annotations: torch.Tensor) -> torch.Tensor:
        """U_a h_j for every j, once per sentence: (B, S, 2H) → (B, S, A)."""
        return self.U_a(annotations)

    def forward(
        self,
        s_prev: torch.Tensor,
        keys: torch.Tensor,
        annotations: torch.Tensor,
        mask: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """s_prev (B, H), keys (B, S, A), annotations (B, S, 2H), mask (B, S) True on words.
        Returns the context c_i (B, 2H) and the weights α_i (B, S)."""
        e = self.v_a(torch.tanh(self.W_a(s_prev)[:, None, :] + keys)).squeeze(-1)  # (B, S)
        e = e.masked_fill(~mask, float("-inf"))  # padding gets exactly zero weight
        alpha = torch.softmax(e, dim=-1)  # (B, S), sums to 1 over the words
        context = (alpha[:, :, None] * annotations).sum(1)  # (B, 2H)
        return context, alpha


class Bahdanau(nn.Module):
    """Bidirectional RNN encoder, additive attention, RNN decoder with a deep output layer."""

    START = BOS

    def __init__(self, config: Config, vocab_size: int, counts=None) -> None:
        super().__init__()
        self.config = c = config
        E, H = c.emb_dim, c.hidden_dim
        rnn = nn.GRU if c.cell == "gru" else nn.LSTM
        cell = nn.GRUCell if c.cell == "gru" else nn.LSTMCell
        self.src_emb = nn.Embedding(vocab_size, E, padding_idx=PAD)
        self.tgt_emb = nn.Embedding(vocab_size, E, padding_idx=PAD)
        self.encoder = rnn(E, H, batch_first=True, bidirectional=True)
        self.init_state = nn.Linear(H, H)  # W_s: s_0 = tanh(W_s ←h_1)
        self.attention = AdditiveAttention(H, 2 * H, c.attn_dim)
        self.cell = cell(E + 2 * H, H)  # input [E y_{i−1}; c_i]
        out_in = E + H + 2 * H  # [E y_{i−1}; s_i; c_i]
        if c.maxout:
            self.deep_out = nn.Linear(out_in, 2 * c.maxout)  # pairs of units, max taken
            self.out = nn.Linear(c.maxout, vocab_size)
        else:
            self.deep_out = None
            self.out = nn.Linear(out_in, vocab_size)
        self.drop = nn.Dropout(c.dropout)

    # ------------------------------------------------------------------ encoder

    def encode(self, src: torch.Tensor) -> dict[str, torch.Tensor]:
        """src (B, S) → annotations (B, S, 2H) (zero at padding), keys U_a h (B, S, A), mask
        (B, S) and the decoder's initial state s_0 (B, H) (and the LSTM cell, zeros)."""
        mask = src != PAD  # (B, S)
        lengths = mask.sum(1).clamp(min=1)  # (B,)
        x = self.drop(self.src_emb(src))  # (B, S, E)
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, h_n = self.encoder(packed)  # h_n (2, B, H): [→h_n, ←h_1] (LSTM: (h, c))
        if isinstance(h_n, tuple):
            h_n = h_n[0]
        ann, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])  # (B,S,2H)
        state = {
            "ann": ann,
            "keys": self.attention.keys(ann),  # (B, S, A)
            "mask": mask,
            "s": torch.tanh(self.init_state(h_n[1])),  # (B, H), from the backward direction
        }
        if self.config.cell == "lstm":
            state["cell"] = torch.zeros_like(state["s"])
        return state

    # ------------------------------------------------------------------ decoder

    def _recur(
        self, state: dict[str, torch.Tensor], emb: torch.Tensor
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor], torch.Tensor]:
        """One step i of the recurrence for a batch: emb (B, E) = E y_{i−1} (dropout applied) →
        the deep output's input [E y_{i−1}; s_i; c_i] (B, E + 3H), the new state, α_i (B, S)."""
        context, alpha = self.attention(state["s"], state["keys"], state["ann"], state["mask"])
        rnn_in = torch.cat([emb, context], dim=-1)  # (B, E + 2H)
        new = dict(state)
        if self.config.cell == "lstm":
            new["s"], new["cell"] = self.cell(rnn_in, (state["s"], state["cell"]))  # (B, H)
        else:
            new["s"] = self.cell(rnn_in, state["s"])  # (B, H)
        return torch.cat([emb, new["s"], context], dim=-1), new, alpha  # (B, E + 3H)

    def _readout(self, t: torch.Tensor) -> torch.Tensor:
        """The output layer: t = [E y_{i−1}; s_i; c_i] (..., E + 3H) → logits (..., V). It reads
        nothing of the next step, so teacher forcing applies it once to every position."""
        if self.deep_out is not None:
            # maxout (Goodfellow et al. 2013), as in the paper's App. A.2.2
            t = self.deep_out(t).unflatten(-1, (-1, 2)).amax(-1)  # (..., maxout)
        return self.out(self.drop(t))

    def _teacher_forced(
        self, src: torch.Tensor, tgt_in: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The output layer's inputs t (B, T, E + 3H) and attention weights α (B, T, S) for a
        given target prefix.

        The loop runs over target positions (each s_i needs c_i, which needs s_{i−1}), batched
        over sentences; the output layer is left to the caller, once for every position."""
        state = self.encode(src)
        emb = self.drop(self.tgt_emb(tgt_in))  # (B, T, E), teacher forcing
        ts, alphas = [], []
        for i in range(tgt_in.shape[1]):
            t, state, alpha = self._recur(state, emb[:, i])
            ts.append(t)
            alphas.append(alpha)
        return torch.stack(ts, 1), torch.stack(alphas, 1)  # (B, T, E + 3H), (B, T, S)

    def decode_teacher_forced(
        self, src: torch.Tensor, tgt_in: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits (B, T, V) and attention weights α (B, T, S) for a given target prefix."""
        t, alphas = self._teacher_forced(src, tgt_in)
        return self._readout(t), alphas

    def forward(
        self, src: torch.Tensor, tgt_in: torch.Tensor, labels: torch.Tensor | None = None
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """src (B, S), tgt_in (B, T) = <s> y, labels (B, T) = y </s> (−100 ignored).
        Returns logits (B, T, V) and the mean cross-entropy, or None. In training mode with
        labels the output layer runs at the labelled positions alone (padding reaches neither
        the loss nor a gradient): the logits are None and the loss is the same mean."""
        t, _ = self._teacher_forced(src, tgt_in)  # (B, T, E + 3H)
        if labels is not None and self.training:
            real = labels != IGNORE  # (B, T)
            logits = self._readout(t[real])  # (N, V), N labelled positions
            return None, label_smoothed_loss(
                logits, labels[real], self.config.label_smoothing, IGNORE
            )
        logits = self._readout(t)  # (B, T, V)
        if labels is None:
            return logits, None
        loss = label_smoothed_loss(logits, labels, self.config.label_smoothing, IGNORE)
        return logits, loss

    def cross_attention(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """α (B, T, S): where each target position looked in the source (the paper's Fig. 3)."""
        return self._teacher_forced(src, tgt_in)[1]

    # ---------------------------------------------------------- decoding (evaluation/decoding.py)

    def start(self, src: torch.Tensor) -> dict[str, torch.Tensor]:
        """Run the encoder once; every state tensor is batch first."""
        return self.encode(src)

    def step(
        self, state: dict[str, torch.Tensor], tokens: torch.Tensor
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        t, state, _ = self._recur(state, self.drop(self.tgt_emb(tokens)))  # tokens (N,)
        return torch.log_softmax(self._readout(t), dim=-1), state  # (N, V)

    def cost(self, vocab_size: int) -> Cost:
        """Q per target token: the bidirectional encoder 2gH(E+H) and U_a h_j (2H×A) once per
        source token, the decoder cell on [E y; c] gH(E+3H), W_a s (H×A), additive scores and
        the context over S = `MT_SPAN` positions S×(A+2H), and the deep output (maxout
        optional); g = 3 gate rows for the GRU, 4 for the LSTM."""
        c = self.config
        e, h, a, m, s = c.emb_dim, c.hidden_dim, c.attn_dim, c.maxout, MT_SPAN
        g = 3 if c.cell == "gru" else 4
        v = vocab_size
        out = (e + 3 * h) * 2 * m + m * v if m else (e + 3 * h) * v
        symbol = "(E+3H)×2M + M×V" if m else "(E+3H)×V"
        q = 2 * g * h * (e + h) + 2 * h * a + g * h * (e + 3 * h) + h * a + s * (a + 2 * h) + out
        return Cost(
            f"2gH(E+H) + 2H×A + gH(E+3H) + H×A + S×(A+2H) + {symbol}",
            f"g={g}, E={e}, H={h}, A={a}, S={s}" + (f", M={m}" if m else "") + f", V={v:,}",
            q,
        )
