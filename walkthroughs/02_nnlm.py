# %% [markdown]
# # 2. Bengio's neural probabilistic language model (NNLM)
#
# The six-word vocabulary {a, cat, mat, on, sat, the} (ids 0..5), feature vectors of m = 3
# numbers, a context of n − 1 = 2 words and h = 2 tanh units:
#
#     x = [C(w_{t−2}); C(w_{t−1})]            (n−1)·m = 6 numbers
#     y = b + W x + U tanh(d + H x)            6 scores, one per word
#     P(w_t = i | context) = softmax(y)_i
#
# Every number below is set by hand into the project's `NNLM` module and read back from its
# forward pass.

# %%
import math

import torch
from _common import REFERENCES, code, full_run, neighbours, show

from nlpzoo.cost import output_term
from nlpzoo.families.nnlm import NNLMConfig
from nlpzoo.models.nnlm import NNLM

torch.set_default_dtype(torch.float64)
torch.set_grad_enabled(False)  # forward passes only; a cell that needs gradients asks for them
WORDS = ["a", "cat", "mat", "on", "sat", "the"]
ID = {w: i for i, w in enumerate(WORDS)}
C = torch.tensor(
    [
        [0.1, 0.2, 0.3],
        [0.4, 0.5, 0.6],
        [0.7, 0.8, 0.9],
        [1.0, 1.1, 1.2],
        [1.3, 1.4, 1.5],
        [1.6, 1.7, 1.8],
    ]
)
H = torch.tensor([[0.1, 0.2, 0.3, 0.4, 0.5, 0.6], [0.7, 0.8, 0.9, 1.0, 1.1, 1.2]])
d = torch.tensor([0.1, 0.2])
# U, W and b are not given in the worked example; any values do: these are chosen by hand
U = torch.tensor([[0.5, -0.3], [0.2, 0.1], [-0.4, 0.6], [0.3, 0.3], [0.1, -0.2], [-0.1, 0.4]])
W = 0.1 * torch.eye(6)
b = torch.tensor([0.0, 0.1, 0.0, -0.1, 0.2, 0.0])

config = NNLMConfig(context_size=2, emb_dim=3, hidden_dim=2, direct=True, output="softmax")
model = NNLM(config, vocab_size=6).eval()
with torch.no_grad():
    model.C.weight.copy_(C)
    model.H.weight.copy_(H)
    model.H.bias.copy_(d)
    model.U.weight.copy_(U)
    model.U.bias.copy_(b)
    model.W.weight.copy_(W)
print(model)

# %% [markdown]
# ## The forward pass, step by step
#
# The worked example says its context is "a cat" but then builds x from C(sat) and C(on):
# x = [1.3, 1.4, 1.5, 1.0, 1.1, 1.2]. We follow that x (context "sat on", next word "a"), and
# redo the pass for "a cat" → "sat" afterwards.

# %%
print("look-up and concatenation:", code("src/nlpzoo/models/nnlm.py", "NNLM._hidden"))
context = torch.tensor([[ID["sat"], ID["on"]]])
x, a = model._hidden(context)
show("x", x[0])
Hx = x[0] @ H.T
show("H x", Hx)
print("The worked example prints H x = [4.81, 11.23]: that is wrong. Row by row,")
print("  0.1·1.3 + 0.2·1.4 + 0.3·1.5 + 0.4·1.0 + 0.5·1.1 + 0.6·1.2 = 2.53")
print("  0.7·1.3 + 0.8·1.4 + 0.9·1.5 + 1.0·1.0 + 1.1·1.1 + 1.2·1.2 = 7.03")
show("d + H x", d + Hx)
show("tanh(d + H x) (the module's hidden layer)", a[0])

# %%
print("scores:", code("src/nlpzoo/models/nnlm.py", "NNLM._logits"))
logits, _ = model(context)
show("U tanh(d + H x)", a[0] @ U.T)
show("W x", x[0] @ W.T)
show("y = b + W x + U tanh(d + H x)", logits[0])
probs = torch.softmax(logits[0], -1)
for w, p in zip(WORDS, probs.tolist(), strict=True):
    print(f"  P({w:>3} | sat on) = {p:.4f}")
print("the next word of 'a cat sat on a mat' after 'sat on' is 'a'")
loss_sat_on = float(torch.nn.functional.cross_entropy(logits.detach(), torch.tensor([ID["a"]])))
print(f"cross-entropy −log P(a | sat on) = {loss_sat_on:.4f}")

# %% [markdown]
# ## The example's softmax
#
# The worked example then assumes the scores y = [0.5, 0.2, 0.9, −1.2, 0.1, 0.8]. Setting
# U = 0, W = 0 and b = y makes the module output exactly these scores; its normalised
# probabilities (`NNLM.log_prob_all`) are P(a) ≈ 0.184, P(cat) ≈ 0.136, P(mat) ≈ 0.274, not the
# 0.17, 0.12, 0.25 the example prints (Σ e^y = 8.96).

# %%
y_example = torch.tensor([0.5, 0.2, 0.9, -1.2, 0.1, 0.8])
with torch.no_grad():
    saved = [t.clone() for t in (model.U.weight, model.U.bias, model.W.weight)]
    model.U.weight.zero_()
    model.W.weight.zero_()
    model.U.bias.copy_(y_example)
print("normalised probabilities:", code("src/nlpzoo/models/nnlm.py", "NNLM.log_prob_all"))
p_example = model.log_prob_all(context)[0].exp()
show("P(· ) from y", p_example)
print(
    f"Σ e^y = {float(y_example.exp().sum()):.4f}; most probable: {WORDS[int(p_example.argmax())]}"
)
with torch.no_grad():
    model.U.weight.copy_(saved[0])
    model.U.bias.copy_(saved[1])
    model.W.weight.copy_(saved[2])

# %% [markdown]
# ## The context the example names: "a cat" → "sat"

# %%
context2 = torch.tensor([[ID["a"], ID["cat"]]])
x2, a2 = model._hidden(context2)
show("x", x2[0])
show("H x", x2[0] @ H.T)
show("tanh(d + H x)", a2[0])
with torch.enable_grad():
    logits2, loss2 = model(context2, torch.tensor([ID["sat"]]))
    loss2.backward()
logits2, loss2 = logits2.detach(), loss2.detach()
show("y", logits2[0])
p2 = torch.softmax(logits2[0], -1)
show("P(· | a cat)", p2)
print(f"P(sat | a cat) = {float(p2[ID['sat']]):.4f}; loss −log P = {float(loss2):.4f}")
print("training moves every parameter, C included (the word vectors are learnt):")
show("∂loss/∂C(a)", model.C.weight.grad[ID["a"]])
show("∂loss/∂C(cat)", model.C.weight.grad[ID["cat"]])

# %% [markdown]
# ## The cost per token: Q = N×D + N×D×H + H×V
#
# Mikolov et al. count the multiply-adds of one training token: N×D to look up N vectors of
# D numbers, N×D×H for the hidden layer, H×V for the output layer (H×log₂V with a hierarchical
# softmax). `NNLM.cost` states it for a model's own sizes; with the direct connections W the
# output layer reads H + N×D numbers.

# %%
print("the formula:", code("src/nlpzoo/models/nnlm.py", "NNLM.cost"))
print("the output term:", code("src/nlpzoo/cost.py", "output_term"))
plain = NNLM(NNLMConfig(context_size=2, emb_dim=3, hidden_dim=2, output="softmax"), 6)
q_toy = plain.cost(6)
print(f"toy, no W: {q_toy.formula} with {q_toy.terms} = {q_toy.multiply_adds:g}")
q_direct = model.cost(6)
print(f"toy, with W: {q_direct.formula} with {q_direct.terms} = {q_direct.multiply_adds:g}")
# the paper's scale, N = 10, D = 500, H = 500, V = 10⁶ (too large to build here: the formula)
N, D_, H_, V_ = 10, 500, 500, 1_000_000
q_soft = N * D_ + N * D_ * H_ + output_term(H_, "H", "softmax", V_)[0]
q_tree = N * D_ + N * D_ * H_ + output_term(H_, "H", "hierarchical", V_)[0]
print(f"N=10, D=500, H=500, V=10⁶: softmax Q = {q_soft:,.0f}; hierarchical Q = {q_tree:,.0f}")
print(f"  (H×V = {H_ * V_:,} against H×log₂V = {H_ * math.log2(V_):,.0f})")

# %% [markdown]
# ## The full run
#
# The committed `nnlm` run: n = 5, m = 60, h = 100 with an adaptive softmax on Brown.

# %%
FULL = full_run(
    "nnlm",
    [
        "test_ppl",
        "valid_ppl",
        "params",
        "cost_formula",
        "cost_per_token",
        "epochs",
        "train_seconds",
    ],
)
NEIGHBOURS = neighbours("nnlm", ["king", "monday", "good"])
RESULTS = {
    "x": x[0].tolist(),
    "Hx": Hx.tolist(),
    "hidden": a[0].tolist(),
    "logits": logits[0].tolist(),
    "probs": probs.tolist(),
    "loss_sat_on": loss_sat_on,
    "example_probs": p_example.tolist(),
    "x_a_cat": x2[0].tolist(),
    "probs_a_cat": p2.tolist(),
    "loss_a_cat": float(loss2),
    "U": U.tolist(),
    "W": W.tolist(),
    "b": b.tolist(),
    "q_toy": q_toy.multiply_adds,
    "q_direct": q_direct.multiply_adds,
    "q_paper_softmax": q_soft,
    "q_paper_hierarchical": q_tree,
    "full_run": FULL,
}
__all__ = ["REFERENCES", "RESULTS"]
