# %% [markdown]
# # 3. Word vectors: CBOW, skip-gram and GloVe
#
# Word2vec drops the NNLM's hidden layer: the input vectors v_c of the context are averaged
# (CBOW) or used one at a time (skip-gram) and scored directly against output vectors u_w.
# The papers' probability is a softmax over the vocabulary,
#
#     CBOW       h = (1/|C|) Σ_{c∈C} v_c,   P(w_t | C) = softmax(U h)_{w_t}
#     skip-gram  h = v_c,                   one prediction per (context, centre) pair
#
# and training replaces that softmax by negative sampling or a hierarchical softmax. Every
# vector below is set by hand into the project's `Word2Vec` and `Glove` modules.

# %%
import tempfile
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from _common import REFERENCES, code, full_run, neighbours, show

from nlpzoo.data.cooccur import count_cooccurrences, load_cooccurrences
from nlpzoo.data.vocab import SPECIALS
from nlpzoo.families.glove import GloveConfig
from nlpzoo.families.word2vec import Word2VecConfig
from nlpzoo.models.glove import Glove, weighting
from nlpzoo.models.word2vec import Word2Vec

torch.set_default_dtype(torch.float64)
torch.set_grad_enabled(False)  # forward passes only; a cell that needs gradients asks for them
WORDS = ["a", "cat", "mat", "on", "sat", "the"]
ID = {w: len(SPECIALS) + i for i, w in enumerate(WORDS)}  # ids 0..3: <unk> <s> </s> <pad>
V = len(SPECIALS) + len(WORDS)
# training counts (noise distribution, Huffman tree): "a cat sat on a mat" plus one "the"
COUNTS = [0, 0, 0, 0, 2, 1, 1, 1, 1, 1]
V_IN = torch.tensor(
    [
        [0.1, 0.2, 0.3],
        [0.4, 0.5, 0.6],
        [0.7, 0.8, 0.9],
        [1.0, 1.1, 1.2],
        [1.3, 1.4, 1.5],
        [1.6, 1.7, 1.8],
    ]
)
U_OUT = torch.tensor(
    [
        [0.2, -0.1, 0.0],
        [-0.3, 0.1, 0.2],
        [0.1, 0.1, -0.2],
        [0.0, 0.3, -0.1],
        [0.4, -0.2, 0.1],
        [-0.1, 0.0, 0.2],
    ]
)


def word2vec(model: str, objective: str) -> Word2Vec:
    cfg = Word2VecConfig(
        model=model, objective=objective, dim=3, window=2, negative=2, backend="torch", batch_size=1
    )
    m = Word2Vec(cfg, V, counts=COUNTS)
    with torch.no_grad():
        m.W_in.zero_()
        m.W_in[len(SPECIALS) :] = V_IN
        if objective == "negative":
            m.W_out.zero_()
            m.W_out[len(SPECIALS) :] = U_OUT
    return m


# "a cat sat on a mat", centre "sat", window 2: contexts a, cat, on, a
inputs = torch.tensor([[ID["a"], ID["cat"], ID["on"], ID["a"]]])
target = torch.tensor([ID["sat"]])
noise = torch.tensor([[ID["mat"], ID["the"]]])  # K = 2 noise words, fixed instead of drawn

# %% [markdown]
# ## CBOW
#
# h is the mean of the four context vectors; with a full softmax over the six words the
# probability of the centre is softmax(U h). The project trains CBOW with negative sampling,
#
#     ℓ = −log σ(u_sat·h) − Σ_k log σ(−u_{n_k}·h),
#
# which only scores the target and K noise words.

# %%
cbow = word2vec("cbow", "negative")
print("h:", code("src/nlpzoo/models/word2vec.py", "Word2Vec.hidden"))
h = cbow.hidden(inputs)[0].detach()
show("h = mean(v_a, v_cat, v_on, v_a)", h)
scores = U_OUT @ h
show("U h (one score per word)", scores)
p_full = torch.softmax(scores, -1)
show("softmax(U h)", p_full)
print(f"full softmax: P(sat | a, cat, on, a) = {float(p_full[WORDS.index('sat')]):.4f}")
print("negative sampling:", code("src/nlpzoo/models/word2vec.py", "Word2Vec.forward"))
_, loss_cbow = cbow(inputs, target, noise)
u = cbow.W_out.detach()
by_hand = -(
    F.logsigmoid(u[ID["sat"]] @ h)
    + F.logsigmoid(-(u[ID["mat"]] @ h))
    + F.logsigmoid(-(u[ID["the"]] @ h))
)
print(f"module ℓ = {float(loss_cbow):.6f}; by hand = {float(by_hand):.6f}")
print(
    f"σ(u_sat·h) = {float(torch.sigmoid(u[ID['sat']] @ h)):.4f}: the model's belief that "
    "(context, sat) is a real pair"
)

# %% [markdown]
# ## Skip-gram
#
# The same window gives four (context, centre) pairs; each context vector alone predicts the
# centre (the project, like word2vec.c, trains each pair in the direction context → centre).

# %%
sg = word2vec("skipgram", "negative")
noise4 = noise.repeat(4, 1)  # the same two noise words for each of the 4 pairs
_, loss_sg = sg(inputs, target, noise4)
pair_losses = []
for c in inputs[0]:
    v = V_IN[int(c) - len(SPECIALS)]
    pair_losses.append(
        float(
            -(
                F.logsigmoid(u[ID["sat"]] @ v)
                + F.logsigmoid(-(u[ID["mat"]] @ v))
                + F.logsigmoid(-(u[ID["the"]] @ v))
            )
        )
    )
show("ℓ per pair (a, cat, on, a)", pair_losses)
print(f"module Σ ℓ = {float(loss_sg):.6f}; by hand = {sum(pair_losses):.6f}")
p_sg = [float(torch.softmax(U_OUT @ V_IN[int(c) - 4], -1)[WORDS.index("sat")]) for c in inputs[0]]
show("full softmax P(sat | c) per pair", p_sg)

# %% [markdown]
# ## Hierarchical softmax
#
# A binary Huffman tree over the counts: P(w | h) is the product of the sigmoids met on the
# path from the root to w, about log₂V of them instead of V scores, and the probabilities of
# all leaves still sum to one.

# %%
hs = word2vec("cbow", "hierarchical")
with torch.no_grad():
    hs.W_out.copy_(torch.linspace(-0.3, 0.3, hs.W_out.numel()).view_as(hs.W_out))
print("tree:", code("src/nlpzoo/models/outputs.py", "huffman_tree"))
print("path:", code("src/nlpzoo/models/word2vec.py", "Word2Vec.output_rows"))


def path_prob(word: int) -> float:
    ids, z = hs.output_rows(torch.tensor([word]))
    s = z[0] * (hs.W_out.detach()[ids[0]] @ h)
    return float(torch.where(z[0] != 0, torch.sigmoid(s), torch.ones_like(s)).prod())


ids, z = hs.output_rows(torch.tensor([ID["sat"]]))
print("inner nodes to 'sat':", ids[0][z[0] != 0].tolist(), "signs", z[0][z[0] != 0].tolist())
p_tree = {w: path_prob(ID[w]) for w in WORDS}
show("P(w | h) over the tree", list(p_tree.values()))
print(f"Σ over every leaf = {sum(path_prob(i) for i in range(V)):.6f}")
_, loss_hs = hs(inputs, target)
print(f"module ℓ = {float(loss_hs):.6f} = −log P(sat | h) = {-np.log(p_tree['sat']):.6f}")

# %% [markdown]
# ## Cost: CBOW Q = N×D + D×log₂V, skip-gram Q = C×(D + D×log₂V)
#
# With negative sampling log₂V becomes K + 1 (the target and K noise words).

# %%
print(code("src/nlpzoo/models/word2vec.py", "Word2Vec.cost"))
costs = {}
for name, m in (("cbow/negative", cbow), ("skipgram/negative", sg), ("cbow/hierarchical", hs)):
    q = m.cost(V)
    costs[name] = q.multiply_adds
    print(f"  {name:<18} {q.formula:<22} {q.terms:<20} Q = {q.multiply_adds:.2f}")

# %% [markdown]
# ## GloVe
#
# GloVe fits the co-occurrence counts instead of predicting words:
#
#     J = Σ_{X_ij > 0} f(X_ij) (w_iᵀ w̃_j + b_i + b̃_j − log X_ij)²,
#     f(x) = (x / x_max)^α below x_max, else 1.
#
# The corpus "I like deep learning. / I like NLP. / I enjoy learning." with a window of one word
# gives the matrix below (counted by the project's co-occurrence stage).

# %%
CORPUS = ["I like deep learning", "I like NLP", "I enjoy learning"]
GWORDS = ["I", "like", "deep", "learning", "NLP", "enjoy"]
gid = {w: len(SPECIALS) + i for i, w in enumerate(GWORDS)}
GV = len(SPECIALS) + len(GWORDS)
print("counting:", code("src/nlpzoo/data/cooccur.py", "count_cooccurrences"))
with tempfile.TemporaryDirectory() as tmp:
    out = Path(tmp) / "cooccur.npz"
    from nlpzoo.params_data import CooccurConfig

    count_cooccurrences(CORPUS, gid, GV, out, CooccurConfig(window=1, distance_weighting=False))
    rows, cols, vals, _ = load_cooccurrences(out)
X = np.zeros((GV, GV))
X[rows, cols] = vals
X6 = X[len(SPECIALS) :, len(SPECIALS) :]
print("      " + " ".join(f"{w:>8}" for w in GWORDS))
for w, row in zip(GWORDS, X6, strict=True):
    print(f"{w:>8} " + " ".join(f"{v:8g}" for v in row))
print("(this matrix agrees with the worked example's)")

# %%
print("weighting:", code("src/nlpzoo/models/glove.py", "weighting"))
f_paper = weighting(torch.tensor([1.0, 2.0, 50.0, 100.0, 400.0]), x_max=100.0, alpha=0.75)
show("f(1), f(2), f(50), f(100), f(400) with x_max = 100, α = 3/4", f_paper)
glove = Glove(GloveConfig(dim=2, x_max=100.0, alpha=0.75, sparse_grad=False), GV)
W_g = torch.tensor([[0.1, 0.2], [0.3, -0.1], [0.0, 0.4], [0.2, 0.2], [-0.2, 0.1], [0.1, -0.3]])
with torch.no_grad():
    glove.word.weight.zero_()
    glove.context.weight.zero_()
    glove.word.weight[len(SPECIALS) :, :2] = W_g
    glove.context.weight[len(SPECIALS) :, :2] = W_g.flip(0)
    glove.word.weight[len(SPECIALS) :, 2] = 0.1  # b_i
nz = torch.from_numpy(np.stack([rows, cols], 1)).long()
x_ij = torch.from_numpy(vals)
print("residual:", code("src/nlpzoo/models/glove.py", "Glove.residual"))
e = glove.residual(nz, x_ij).detach()
f = weighting(x_ij, 100.0, 0.75)
for (i, j), xv, ev, fv in zip(nz.tolist(), x_ij.tolist(), e.tolist(), f.tolist(), strict=True):
    print(f"  X[{GWORDS[i - 4]:>8}, {GWORDS[j - 4]:<8}] = {xv:g}  f = {fv:.4f}  e = {ev:+.4f}")
print("cost:", code("src/nlpzoo/models/glove.py", "Glove.forward"))
_, mean_half = glove(nz, x_ij)
J = float((f * e * e).sum())
print(
    f"module: mean ½ f e² = {float(mean_half):.6f}; the paper's J = Σ f e² = {J:.6f}"
    f" = 2 × {len(vals)} × the module's value"
)
print(code("src/nlpzoo/models/glove.py", "Glove.cost"), "→", glove.cost(GV).formula)

# %% [markdown]
# ## The full runs
#
# All four vector runs on the same 0.8 M training words of Brown: analogy accuracy and the
# Spearman correlations with WordSim-353 and SimLex-999 (the report sets them side by side).

# %%
KEYS = ["analogy_acc", "ws353_rho", "simlex_rho", "cost_formula", "cost_per_token", "fit_seconds"]
FULL = {run: full_run(run, KEYS) for run in ("cbow", "skipgram", "glove", "svd")}
NEIGHBOURS = {run: neighbours(run, ["king", "money", "war"]) for run in ("skipgram", "glove")}
RESULTS = {
    "h": h.tolist(),
    "cbow_full_softmax": p_full.tolist(),
    "cbow_loss": float(loss_cbow),
    "skipgram_pair_losses": pair_losses,
    "skipgram_loss": float(loss_sg),
    "tree_probs": p_tree,
    "tree_total": sum(path_prob(i) for i in range(V)),
    "tree_loss": float(loss_hs),
    "costs": costs,
    "glove_X": X6.tolist(),
    "glove_f_paper": f_paper.tolist(),
    "glove_J": J,
    "glove_mean_half": float(mean_half),
    "glove_W": W_g.tolist(),
    "full_run": FULL,
}
__all__ = ["REFERENCES", "RESULTS"]
