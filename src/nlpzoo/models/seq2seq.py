"""LSTM encoder–decoder: Sutskever, Vinyals & Le (NeurIPS 2014), "Sequence to Sequence Learning
with Neural Networks".

A deep LSTM reads the source; its final state (h, c) of every layer is the whole summary of the
sentence and initialises a deep LSTM decoder that models the target left to right:

    (h_L, c_L) = LSTM_enc(E x_1 .. E x_n)                 every layer's last state (§2)
    s_t, (h, c) = LSTM_dec(E y_{t-1}, (h, c)),   (h, c) starts at (h_L, c_L)
    p(y_t | y_<t, x) = softmax(W s_t + b)                 W: H → V
    log p(y | x) = Σ_t log p(y_t | y_<t, x)    teacher forcing: y_{t-1} is the reference

The paper's trick (§3.3): read the source *reversed*, so that the first target words sit close to
the first source words ("introduces many short term dependencies"); `reverse_source`. The paper's
model has 4 layers of 1000 cells, 1000-dimensional embeddings, uniform init in [−0.08, 0.08], SGD
at 0.7 halved every half epoch after 5 epochs, gradient norm clipped at 5.

Symbols: B batch, S source positions, T target positions, V vocabulary (shared SentencePiece),
E = `emb_dim`, H = `hidden_dim`, L = `num_layers`.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from nlpzoo.cost import Cost
from nlpzoo.data.vocab import BOS, IGNORE, PAD
from nlpzoo.families.seq2seq import Seq2SeqConfig
from nlpzoo.models.losses import label_smoothed_loss

Config = Seq2SeqConfig  # the `seq2seq` params section (nlpzoo.families)


def reverse_padded(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse the first lengths[b] entries of each row of x (B, S, ...); padding stays put."""
    S = x.shape[1]
    j = torch.arange(S, device=x.device)[None, :]  # (1, S)
    idx = torch.where(j < lengths[:, None], lengths[:, None] - 1 - j, j)  # (B, S)
    idx = idx.view(*idx.shape, *([1] * (x.dim() - 2))).expand_as(x)
    return x.gather(1, idx)


class Seq2Seq(nn.Module):
    """Deep LSTM encoder, final states → deep LSTM decoder, softmax output."""

    START = BOS  # the decoder's first input

    def __init__(self, config: Config, vocab_size: int, counts=None) -> None:
        super().__init__()
        self.config = c = config
        self.src_emb = nn.Embedding(vocab_size, c.emb_dim, padding_idx=PAD)
        self.tgt_emb = nn.Embedding(vocab_size, c.emb_dim, padding_idx=PAD)
        drop = c.dropout if c.num_layers > 1 else 0.0
        self.encoder = nn.LSTM(
            c.emb_dim, c.hidden_dim, c.num_layers, batch_first=True, dropout=drop
        )
        self.decoder = nn.LSTM(
            c.emb_dim, c.hidden_dim, c.num_layers, batch_first=True, dropout=drop
        )
        self.drop = nn.Dropout(c.dropout)
        self.out = nn.Linear(c.hidden_dim, vocab_size)
        for p in self.parameters():  # the paper: uniform in [−0.08, 0.08]
            nn.init.uniform_(p, -c.init_range, c.init_range)
        with torch.no_grad():
            self.src_emb.weight[PAD].zero_()
            self.tgt_emb.weight[PAD].zero_()

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """src (B, S) → outputs (B, S, H) (zero at padding) and every layer's final (h, c),
        each (L, B, H). Packing makes the final state the one after each sentence's last word."""
        lengths = (src != PAD).sum(1).clamp(min=1)  # (B,), an empty line reads one <pad>
        if self.config.reverse_source:
            src = reverse_padded(src, lengths)  # x_n .. x_1, then padding
        x = self.drop(self.src_emb(src))  # (B, S, E)
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, (h, c) = self.encoder(packed)  # h, c (L, B, H)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=src.shape[1])  # (B, S, H)
        return out, (h, c)

    def forward(
        self, src: torch.Tensor, tgt_in: torch.Tensor, labels: torch.Tensor | None = None
    ) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """src (B, S), tgt_in (B, T) = <s> y, labels (B, T) = y </s> (−100 ignored).
        Returns logits (B, T, V) and the mean cross-entropy, or None. In training mode with
        labels the output layer runs at the labelled positions alone (padding reaches neither
        the loss nor a gradient): the logits are None and the loss is the same mean."""
        _, state = self.encode(src)
        y = self.drop(self.tgt_emb(tgt_in))  # (B, T, E), teacher forcing
        s, _ = self.decoder(y, state)  # (B, T, H); later positions never affect earlier ones
        s = self.drop(s)  # over every position: the same dropout draws as the full logits'
        if labels is not None and self.training:
            real = labels != IGNORE  # (B, T)
            logits = self.out(s[real])  # (N, V), N labelled positions
            return None, label_smoothed_loss(
                logits, labels[real], self.config.label_smoothing, IGNORE
            )
        logits = self.out(s)  # (B, T, V)
        if labels is None:
            return logits, None
        loss = label_smoothed_loss(logits, labels, self.config.label_smoothing, IGNORE)
        return logits, loss

    # ---------------------------------------------------------- decoding (evaluation/decoding.py)

    def start(self, src: torch.Tensor) -> dict[str, torch.Tensor]:
        """Run the encoder once; the decoder state, batch first: h, c (B, L, H)."""
        _, (h, c) = self.encode(src)
        return {"h": h.transpose(0, 1).contiguous(), "c": c.transpose(0, 1).contiguous()}

    def step(
        self, state: dict[str, torch.Tensor], tokens: torch.Tensor
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """One decoder step: tokens (N,) = y_{t-1} → log p(y_t | ...) (N, V) and the new state."""
        h = state["h"].transpose(0, 1).contiguous()  # (L, N, H)
        c = state["c"].transpose(0, 1).contiguous()
        s, (h, c) = self.decoder(self.tgt_emb(tokens)[:, None], (h, c))  # s (N, 1, H)
        log_p = torch.log_softmax(self.out(s[:, 0]), dim=-1)  # (N, V)
        return log_p, {"h": h.transpose(0, 1), "c": c.transpose(0, 1)}

    def cost(self, vocab_size: int) -> Cost:
        """Q per target token = 2 Σ_l 4H×(in_l + H) + H×V: the encoder's and the decoder's LSTM
        layers (one source token per target token) and the output layer."""
        c = self.config
        e, h, layers = c.emb_dim, c.hidden_dim, c.num_layers
        q = 2 * sum(4 * h * ((e if i == 0 else h) + h) for i in range(layers)) + h * vocab_size
        return Cost("2 Σ_l 4H×(in_l + H) + H×V", f"L={layers}, E={e}, H={h}, V={vocab_size:,}", q)
