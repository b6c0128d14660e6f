# %% [markdown]
# # 4. Recurrent language models: Elman RNN and LSTM
#
# A window MLP sees a fixed number of words; a recurrent network carries a state through the
# whole sentence. With x_t = E w_t (the project's `RNNLM`, `cell: rnn`):
#
#     h_t = tanh(W_ih x_t + b_ih + W_hh h_{t−1} + b_hh),   P(w_{t+1} | w_≤t) = softmax(U h_t + b)
#
# x_t and h_{t−1} are *concatenated* (equivalently: two matrices, one per input), not added:
# with 300-dimensional embeddings and 128 hidden units the weight is (300 + 128) × 128. A
# formula written as tanh(W (x_t + h_{t−1}) + b) cannot be meant literally, since x_t and
# h_{t−1} do not even have the same size.
#
# The LSTM adds a cell state c_t, written through gates:
#
#     i, f, g, o = σ, σ, tanh, σ  of  W_ih x_t + b_ih + W_hh h_{t−1} + b_hh     (4h rows)
#     c_t = f ⊙ c_{t−1} + i ⊙ g,     h_t = o ⊙ tanh(c_t)

# %%
import numpy as np
import torch
from _common import REFERENCES, code, full_run, show

from nlpzoo.families.rnn_lm import RNNLMConfig
from nlpzoo.models.rnn_lm import RNNLM

torch.set_default_dtype(torch.float64)
torch.set_grad_enabled(False)  # forward passes only; a cell that needs gradients asks for them
WORDS = ["a", "cat", "mat", "on", "sat", "the"]
ID = {w: i for i, w in enumerate(WORDS)}
E = torch.tensor(
    [
        [0.1, 0.2, 0.3],
        [0.4, 0.5, 0.6],
        [0.7, 0.8, 0.9],
        [1.0, 1.1, 1.2],
        [1.3, 1.4, 1.5],
        [1.6, 1.7, 1.8],
    ]
)
W_IH = torch.tensor([[0.1, 0.2, 0.3], [0.7, 0.8, 0.9]]) - 0.5  # h × d
W_HH = torch.tensor([[0.5, -0.4], [0.3, 0.2]])  # h × h
B_H = torch.tensor([0.1, 0.2])
U = torch.tensor([[0.5, -0.3], [0.2, 0.1], [-0.4, 0.6], [0.3, 0.3], [0.1, -0.2], [-0.1, 0.4]])
sentence = ["a", "cat", "sat", "on", "a"]
ids = torch.tensor([[ID[w] for w in sentence]])
targets = torch.tensor([[ID[w] for w in ["cat", "sat", "on", "a", "mat"]]])


def rnnlm(cell: str) -> RNNLM:
    cfg = RNNLMConfig(
        cell=cell,
        emb_dim=3,
        hidden_dim=2,
        num_layers=1,
        dropout=0.0,
        tie_weights=False,
        output="softmax",
    )
    return RNNLM(cfg, vocab_size=6).eval()


rnn = rnnlm("rnn")
with torch.no_grad():
    rnn.embed.weight.copy_(E)
    rnn.rnn.weight_ih_l0.copy_(W_IH)
    rnn.rnn.weight_hh_l0.copy_(W_HH)
    rnn.rnn.bias_ih_l0.copy_(B_H)
    rnn.rnn.bias_hh_l0.zero_()
    rnn.out.weight.copy_(U)
    rnn.out.bias.zero_()

# %% [markdown]
# ## The tanh RNN over "a cat sat on a", step by step

# %%
print("the layers (nn.RNN / nn.LSTM):", code("src/nlpzoo/models/rnn_lm.py", "RNNLM.__init__"))
print("h_0 = 0:", code("src/nlpzoo/models/rnn_lm.py", "RNNLM.init_state"))
print("the model:", code("src/nlpzoo/models/rnn_lm.py", "RNNLM.forward"))
logits, loss, h_last = rnn(ids, targets)
h = torch.zeros(2)
rnn_states = []
for t, w in enumerate(sentence):
    pre = W_IH @ E[ID[w]] + B_H + W_HH @ h
    h = torch.tanh(pre)
    rnn_states.append(h.tolist())
    print(
        f"t={t + 1} {w:>3}: W_ih x + W_hh h + b = {np.round(pre.numpy(), 4)}  h = "
        f"{np.round(h.numpy(), 4)}"
    )
show("the module's final state", h_last[0, 0])
p = torch.softmax(logits[0], -1)
show("P(next word) after each step", p)
print(f"mean cross-entropy over the 5 predictions = {float(loss):.4f}")
rnn_loss = float(loss)

# %% [markdown]
# ## The LSTM: the same sentence through the gates

# %%
lstm = rnnlm("lstm")
g = torch.Generator().manual_seed(0)
with torch.no_grad():
    lstm.embed.weight.copy_(E)
    for p_ in (lstm.rnn.weight_ih_l0, lstm.rnn.weight_hh_l0, lstm.rnn.bias_ih_l0):
        p_.copy_(torch.round(torch.rand(p_.shape, generator=g) - 0.5, decimals=1))
    lstm.rnn.bias_hh_l0.zero_()
    lstm.out.weight.copy_(U)
    lstm.out.bias.zero_()
Wi, Wh, bi = (
    lstm.rnn.weight_ih_l0.detach(),
    lstm.rnn.weight_hh_l0.detach(),
    lstm.rnn.bias_ih_l0.detach(),
)
show("W_ih (rows: i, i, f, f, g, g, o, o)", Wi)
show("W_hh", Wh)
show("b", bi)
h, c = torch.zeros(2), torch.zeros(2)
lstm_states = []
for t, w in enumerate(sentence):
    z = Wi @ E[ID[w]] + bi + Wh @ h
    i, f, gg, o = (
        torch.sigmoid(z[0:2]),
        torch.sigmoid(z[2:4]),
        torch.tanh(z[4:6]),
        torch.sigmoid(z[6:8]),
    )
    c = f * c + i * gg
    h = o * torch.tanh(c)
    lstm_states.append((h.tolist(), c.tolist()))
    print(
        f"t={t + 1} {w:>3}: i={np.round(i.numpy(), 3)} f={np.round(f.numpy(), 3)} "
        f"g={np.round(gg.numpy(), 3)} o={np.round(o.numpy(), 3)} → c={np.round(c.numpy(), 4)} "
        f"h={np.round(h.numpy(), 4)}"
    )
_, lstm_loss, (h_n, c_n) = lstm(ids, targets)
show("the module's final h", h_n[0, 0])
show("the module's final c", c_n[0, 0])
print(f"mean cross-entropy = {float(lstm_loss):.4f}")

# %% [markdown]
# ## Sizes and cost
#
# Q = Σ_l g×H×(in_l + H) + H×V per token, g = 1 gate row block for the tanh RNN and 4 for the
# LSTM. With 300-dimensional vectors, 128 units and V = 10⁴ the tanh RNN's recurrent weight has
# (300 + 128) × 128 = 54,784 entries; a deep LSTM's upper layers read 128 + 128 numbers.

# %%
print(code("src/nlpzoo/models/rnn_lm.py", "RNNLM.cost"))
costs = {}
for cell, layers in (("rnn", 1), ("lstm", 1), ("lstm", 2)):
    cfg = RNNLMConfig(
        cell=cell,
        emb_dim=300,
        hidden_dim=128,
        num_layers=layers,
        dropout=0.0,
        tie_weights=False,
        output="softmax",
    )
    m = RNNLM(cfg, vocab_size=10_000)
    q = m.cost(10_000)
    costs[f"{cell}x{layers}"] = q.multiply_adds
    shapes = [tuple(w.shape) for n, w in m.rnn.named_parameters() if n.startswith("weight")]
    print(f"  {cell} × {layers}: {q.formula}, {q.terms}: Q = {q.multiply_adds:,}; weights {shapes}")

# %% [markdown]
# ## The full runs
#
# `rnn_lm` (Elman, 1 × 200, tied) and `lstm_lm` (2 × 200, adaptive softmax) on Brown.

# %%
KEYS = ["test_ppl", "valid_ppl", "params", "cost_per_token", "epochs", "train_seconds"]
FULL = {run: full_run(run, KEYS) for run in ("rnn_lm", "lstm_lm")}
RESULTS = {
    "rnn_states": rnn_states,
    "rnn_module_final": h_last[0, 0].tolist(),
    "rnn_loss": rnn_loss,
    "rnn_probs": p.tolist(),
    "lstm_weights": (Wi.tolist(), Wh.tolist(), bi.tolist()),
    "lstm_states": lstm_states,
    "lstm_module_final": (h_n[0, 0].tolist(), c_n[0, 0].tolist()),
    "lstm_loss": float(lstm_loss),
    "costs": costs,
    "full_run": FULL,
}
__all__ = ["REFERENCES", "RESULTS"]
