"""Recurrent language models: Elman's tanh RNN and the (deep) LSTM, one file for both.

`cell: rnn` is the simple recurrent network of Elman (1990), used as a language model by Mikolov,
Karafiát, Burget, Černocký & Khudanpur (Interspeech 2010, "RNNLM"). With x_t = E w_t:

    h_t = tanh(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)
    y_t = b + U h_t,         P(w_{t+1} = i | w_1..w_t) = softmax(y_t)_i

`cell: lstm` replaces the recurrence by the long short-term memory of Hochreiter & Schmidhuber
(1997), in the form with a forget gate that PyTorch implements:

    i, f, g, o = σ(·), σ(·), tanh(·), σ(·)  of  W_ih x_t + b_ih + W_hh h_{t-1} + b_hh   (4h rows)
    c_t = f ⊙ c_{t-1} + i ⊙ g,     h_t = o ⊙ tanh(c_t)

Layers stack (`num_layers`): layer l reads h_t of layer l-1. As in Zaremba, Sutskever & Vinyals
(2014), "Recurrent neural network regularization", dropout acts only on the non-recurrent
connections: on the embeddings, between layers and before the output layer — never on h_{t-1} → h_t.
With `tie_weights` the output matrix U is the input embedding E (Press & Wolf 2017; Inan, Khosravi
& Socher 2017), which needs emb_dim == hidden_dim and removes V·d parameters.

Training is truncated back-propagation through time: the stream is cut into (B, T) blocks, the
final state of one block starts the next (`Family.stateful`), and gradients stop at block boundaries
(`detach_state`). Gradient clipping, which the RNN needs, is the trainer's `gradient_clip_val`.

Symbols: B batch, T time steps per block (`bptt`), V vocabulary, d = `emb_dim`, h = `hidden_dim`,
L = `num_layers`, g gates per cell (1 for rnn, 4 for lstm).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from nlpzoo.cost import Cost, output_term
from nlpzoo.errors import ConfigError
from nlpzoo.families.rnn_lm import RNNLMConfig
from nlpzoo.models.outputs import FullSoftmax, check_cutoffs, make_output

State = torch.Tensor | tuple[torch.Tensor, torch.Tensor]  # h, or (h, c); each (L, B, h)

# Paper settings, for reference (all plain SGD; "clip" is the bound on the gradient norm):
#   Mikolov 2010:          1 layer of sigmoid units (a few hundred), no dropout, lr 0.1 halved
#                          when the validation likelihood stops improving
#   Zaremba 2014 small:    2 × 200 LSTM, dropout 0,   bptt 20, batch 20, lr 1,  clip 5, init 0.1
#   Zaremba 2014 medium:   2 × 650 LSTM, dropout 0.5, bptt 35, batch 20, lr 1,  clip 5, init 0.05
#   pytorch/examples word_language_model: 2 × 200, dropout 0.2, bptt 35, lr 20, clip 0.25
# The defaults below are Zaremba's small sizes with the medium bptt, light dropout and tying, and
# Adam, so that a CPU reaches a useful perplexity on Brown (1.16 M tokens) in a few epochs.


Config = RNNLMConfig  # the `rnn_lm` params section (nlpzoo.families)


class RNNLM(nn.Module):
    """Embedding → L recurrent layers (tanh RNN or LSTM) → softmax over V, state carried on."""

    def __init__(self, config: Config, vocab_size: int, counts: list[int] | None = None) -> None:
        super().__init__()
        # counts (training frequency per id): the Huffman tree of the hierarchical output
        self.config = c = config
        if c.output == "adaptive":
            try:
                check_cutoffs(c.cutoffs, vocab_size)
            except ValueError as e:
                raise ConfigError(f"key 'cutoffs': {e}") from None
        if c.output == "hierarchical" and counts is None:
            raise ConfigError(
                "key 'output' hierarchical builds a Huffman tree from the training count of "
                "every word: construct the model with counts="
            )
        self.embed = nn.Embedding(vocab_size, c.emb_dim)  # E, V×d
        # Zaremba dropout: nn.RNN/nn.LSTM apply `dropout` to the outputs of every layer but the
        # last, i.e. between layers and never on the recurrent connections
        between = c.dropout if c.num_layers > 1 else 0.0
        if c.cell == "rnn":
            self.rnn = nn.RNN(
                c.emb_dim,
                c.hidden_dim,
                c.num_layers,
                nonlinearity="tanh",
                batch_first=True,
                dropout=between,
            )
        else:
            self.rnn = nn.LSTM(
                c.emb_dim, c.hidden_dim, c.num_layers, batch_first=True, dropout=between
            )
        self.drop = nn.Dropout(c.dropout)  # on the embeddings and before the output layer
        # U (V×h) and b; or the adaptive / hierarchical layer (models/outputs.py)
        self.out = make_output(c.output, c.hidden_dim, vocab_size, counts, c.cutoffs, c.div_value)
        self.softmax = isinstance(self.out, FullSoftmax)
        for p in self.parameters():
            nn.init.uniform_(p, -c.init_range, c.init_range)  # Zaremba et al.: all parameters
        if c.tie_weights:
            # weight tying (Press & Wolf 2017; Inan et al. 2017): U and E are one parameter
            self.out.weight = self.embed.weight

    def init_state(self, batch_size: int, device: torch.device | str | None = None) -> State:
        """Zero state for `batch_size` streams: h, or (h, c) for the LSTM, each (L, B, h)."""
        c = self.config
        dtype = self.embed.weight.dtype
        h = torch.zeros(c.num_layers, batch_size, c.hidden_dim, device=device, dtype=dtype)
        return h if c.cell == "rnn" else (h, torch.zeros_like(h))

    @staticmethod
    def detach_state(state: State) -> State:
        """The same values, cut from the graph: back-propagation stops at the block boundary."""
        if isinstance(state, tuple):
            return tuple(s.detach() for s in state)
        return state.detach()

    def forward(
        self,
        inputs: torch.Tensor,
        targets: torch.Tensor | None = None,
        state: State | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None, State]:
        """inputs, targets (B, T) ids; state from the previous block or None (zeros).

        Returns logits (B, T, V), the mean cross-entropy over all B·T targets (or None), and the
        state after the last step. The adaptive and hierarchical outputs never form the V scores:
        their logits are None and the loss is the mean of −log p(target) they give.
        """
        if state is None:
            state = self.init_state(inputs.shape[0], inputs.device)
        x = self.drop(self.embed(inputs))  # (B, T, d)
        hs, state = self.rnn(x, state)  # (B, T, h); state (L, B, h) or a pair of them
        hs = self.drop(hs)
        if not self.softmax:
            loss = None
            if targets is not None:
                loss = -self.out.log_prob(hs.reshape(-1, hs.shape[-1]), targets.reshape(-1)).mean()
            return None, loss, state
        logits = self.out(hs)  # (B, T, V) = b + U h_t
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        return logits, loss, state

    def token_log_probs(
        self, inputs: torch.Tensor, targets: torch.Tensor, state: State | None = None
    ) -> tuple[torch.Tensor, State]:
        """Natural-log probability of each target, (B, T) float32, and the new state."""
        if not self.softmax:
            if state is None:
                state = self.init_state(inputs.shape[0], inputs.device)
            hs, state = self.rnn(self.drop(self.embed(inputs)), state)  # (B, T, h)
            h = self.drop(hs).reshape(-1, hs.shape[-1])
            lp = self.out.log_prob(h, targets.reshape(-1)).float()
            return lp.view(targets.shape), state
        logits, _, state = self.forward(inputs, None, state)
        logp = torch.log_softmax(logits.float(), dim=-1)  # (B, T, V), normalised over all of V
        return logp.gather(-1, targets[..., None]).squeeze(-1), state  # (B, T)

    def log_prob_all(
        self, inputs: torch.Tensor, state: State | None = None
    ) -> tuple[torch.Tensor, State]:
        """The whole next-word distribution after each input, log p(· | history), (B, T, V)
        float32, continuing `state` (None: zeros), and the state after the last input: what
        generation feeds one token at a time."""
        if state is None:
            state = self.init_state(inputs.shape[0], inputs.device)
        hs, state = self.rnn(self.drop(self.embed(inputs)), state)  # (B, T, h)
        h = self.drop(hs).reshape(-1, hs.shape[-1])  # (B·T, h)
        lp = self.out.log_prob_all(h).float()  # (B·T, V), exact for every output kind
        return lp.view(*inputs.shape, -1), state

    def embeddings(self) -> torch.Tensor:
        """The input word vectors E, (V, d)."""
        return self.embed.weight.detach()

    def cost(self, vocab_size: int) -> Cost:
        """Q = Σ_l g×H×(in_l + H) + the output term, with this run's sizes (a
        hierarchical output is counted as a balanced tree, H×log₂V, as Mikolov et al. do)."""
        c = self.config
        d, h, layers = c.emb_dim, c.hidden_dim, c.num_layers
        lstm = c.cell == "lstm"
        g = 4 if lstm else 1
        counted = self.out.num_ops_per_token() if c.output == "adaptive" else None
        last, symbol = output_term(h, "H", c.output, vocab_size, counted)
        recurrent = sum(g * h * ((d if i == 0 else h) + h) for i in range(layers))
        return Cost(
            f"Σ_l g×H×(in_l + H) + {symbol}",
            f"g={g} ({'LSTM' if lstm else 'tanh RNN'}), L={layers}, D={d}, H={h}, V={vocab_size:,}",
            None if last is None else recurrent + last,
        )
