# %% [markdown]
# # 5. Sequence to sequence: a deep LSTM encoder and decoder
#
# The encoder reads the source; the final (h, c) of *every* layer is all the decoder gets, as
# its initial state. The decoder is a language model of the target conditioned on that state:
#
#     (h, c) = LSTM_enc(E x_n .. E x_1)          the source read in reverse (the paper's trick)
#     s_t, (h, c) = LSTM_dec(E y_{t−1}, (h, c)),  p(y_t | y_<t, x) = softmax(W s_t + b)
#
# Training feeds the reference y_{t−1} at every step (teacher forcing); translating feeds the
# decoder its own previous output, starting from <s>, until it emits </s>. This page builds the
# project's `Seq2Seq` with 2 layers of 2 cells on a toy vocabulary and checks both.

# %%
from types import SimpleNamespace

import numpy as np
import torch
from _common import REFERENCES, code, full_run, show

from nlpzoo.data.vocab import BOS, EOS, PAD, SPECIALS
from nlpzoo.families.seq2seq import Seq2SeqConfig
from nlpzoo.models.seq2seq import Seq2Seq, reverse_padded

torch.set_default_dtype(torch.float64)
torch.set_grad_enabled(False)  # forward passes only; a cell that needs gradients asks for them
torch.manual_seed(0)
WORDS = ["a", "cat", "mat", "on", "sat", "the"]
ID = {w: len(SPECIALS) + i for i, w in enumerate(WORDS)}
VOCAB = list(SPECIALS) + WORDS
V = len(VOCAB)
cfg = Seq2SeqConfig(
    emb_dim=3, hidden_dim=2, num_layers=2, dropout=0.0, reverse_source=True, init_range=0.5
)
model = Seq2Seq(cfg, V).eval()
print(model)

# %% [markdown]
# ## Reading the source backwards
#
# Padding stays at the end; only the words are reversed, so "a cat sat" is read "sat cat a".

# %%
print(code("src/nlpzoo/models/seq2seq.py", "reverse_padded"))
src = torch.tensor([[ID["a"], ID["cat"], ID["sat"]], [ID["the"], ID["mat"], PAD]])
lengths = (src != PAD).sum(1)
rev = reverse_padded(src, lengths)
for row, r in zip(src.tolist(), rev.tolist(), strict=True):
    print(f"  {' '.join(VOCAB[i] for i in row):<16} → {' '.join(VOCAB[i] for i in r)}")

# %% [markdown]
# ## The encoder's final state is the decoder's first state

# %%
print("encoder:", code("src/nlpzoo/models/seq2seq.py", "Seq2Seq.encode"))
one = src[:1]
_, (h, c) = model.encode(one)
show("h of layers 1 and 2 after the last source word", h[:, 0])
show("c of layers 1 and 2", c[:, 0])
# the same state by running the encoder LSTM by hand over the reversed source
_, (h_hand, c_hand) = model.encoder(model.src_emb(rev[:1]))
print(
    "equal to the LSTM run over 'sat cat a':", torch.allclose(h, h_hand), torch.allclose(c, c_hand)
)

# %% [markdown]
# ## Teacher forcing, and the same numbers one step at a time
#
# Target "the cat sat": tgt_in = <s> the cat sat, labels = the cat sat </s>. The loss of
# `Seq2Seq.forward` is the mean of −log p(label) over the four positions; `Seq2Seq.step` (what
# beam search calls) gives the same log-probabilities one position at a time.

# %%
tgt = [ID["the"], ID["cat"], ID["sat"]]
tgt_in = torch.tensor([[BOS, *tgt]])
labels = torch.tensor([[*tgt, EOS]])
print("training:", code("src/nlpzoo/models/seq2seq.py", "Seq2Seq.forward"))
logits, loss = model(one, tgt_in, labels)
logp = torch.log_softmax(logits[0], -1)
nll = -logp.gather(1, labels[0][:, None]).squeeze(1)
show("−log p(label) per position (teacher forcing)", nll)
print(f"loss = {float(loss):.6f} = mean {float(nll.mean()):.6f}")
print("one step:", code("src/nlpzoo/models/seq2seq.py", "Seq2Seq.step"))
state = model.start(one)
stepwise = []
for t in range(4):
    lp, state = model.step(state, tgt_in[:, t])
    stepwise.append(float(-lp[0, labels[0, t]]))
show("−log p(label) step by step", stepwise)

# %% [markdown]
# ## Greedy decoding: the decoder reads its own output
#
# The weights are random, so the "translation" is nonsense; what matters is the loop.

# %%
state = model.start(one)
token, greedy = torch.tensor([BOS]), []
for _ in range(5):
    lp, state = model.step(state, token)
    token = lp.argmax(-1)
    greedy.append(VOCAB[int(token)])
    if int(token) == EOS:
        break
print("greedy output:", " ".join(greedy))

# %% [markdown]
# ## Cost per target token: 2 Σ_l 4H×(in_l + H) + H×V
#
# The paper's model (4 layers of 1000 cells, 1000-dimensional embeddings, 80,000 target words)
# is too large to build here; its cost is a function of the sizes alone.

# %%
print(code("src/nlpzoo/models/seq2seq.py", "Seq2Seq.cost"))
toy = model.cost(V)
paper_cfg = Seq2SeqConfig(emb_dim=1000, hidden_dim=1000, num_layers=4)
paper = Seq2Seq.cost(SimpleNamespace(config=paper_cfg), 80_000)
print(f"  toy:   {toy.terms}: Q = {toy.multiply_adds:,}")
print(f"  paper: {paper.terms}: Q = {paper.multiply_adds:,}")

# %% [markdown]
# ## The full run
#
# `seq2seq` on Multi30k de→en: 2 × 256 LSTM cells, reversed source, beam 5.

# %%
FULL = full_run(
    "seq2seq",
    ["bleu_tok_lc_beam", "bleu_beam", "chrf_beam", "test_ppl", "params", "epochs", "train_seconds"],
)
RESULTS = {
    "src": src.tolist(),
    "reversed": rev.tolist(),
    "enc_h": h[:, 0].tolist(),
    "enc_c": c[:, 0].tolist(),
    "logits": logits[0].tolist(),
    "labels": labels[0].tolist(),
    "loss": float(loss),
    "stepwise_nll": stepwise,
    "cost_toy": toy.multiply_adds,
    "cost_paper": paper.multiply_adds,
    "full_run": FULL,
}
__all__ = ["REFERENCES", "RESULTS", "np"]
