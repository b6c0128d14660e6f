# %% [markdown]
# # 7. The Transformer decoder layer, by hand
#
# The decoder of "<START> I love AI" with d_model = 4 and two heads of d_k = 2:
#
#     Attention(Q, K, V) = softmax(Q Kᵀ / √d_k + M) V,   M = −∞ above the diagonal
#     MultiHead = Concat(head_1, head_2) W^O
#     x ← LayerNorm(x + MultiHead(x))                     Add & Norm, after every sub-layer
#     cross-attention: queries from the decoder, keys and values from the encoder's output
#     FFN(x) = max(0, x W_1 + b_1) W_2 + b_2
#
# The worked example leaves out the 1/√d_k scaling; that leaves the mask alone but changes the
# weights, so both are shown. Every step runs in the project's
# `transformer_blocks` module.

# %%
import math

import numpy as np
import torch
from _common import REFERENCES, code, full_run, show

from nlpzoo.models.transformer_blocks import (
    CausalSelfAttention,
    FeedForward,
    attention,
    causal_mask,
)

torch.set_default_dtype(torch.float64)
torch.set_grad_enabled(False)  # forward passes only; a cell that needs gradients asks for them
TOKENS = ["<START>", "I", "love", "AI"]
X = torch.tensor(
    [[1.0, 0.5, 0.0, 0.5], [0.8, 0.6, 0.2, 0.4], [0.2, 0.9, 0.3, 0.1], [0.4, 0.7, 0.5, 0.2]]
)
Q1 = torch.tensor([[1.0, 0.5], [0.8, 0.6], [0.2, 0.9], [0.4, 0.7]])
K1 = torch.tensor([[0.9, 0.4], [0.7, 0.5], [0.3, 0.8], [0.5, 0.6]])
V1 = torch.tensor([[0.2, 0.8], [0.5, 0.3], [0.7, 0.1], [0.4, 0.6]])
V2 = torch.tensor([[0.3, 0.5], [0.8, 0.2], [0.1, 0.7], [0.6, 0.4]])
A2_GIVEN = torch.tensor(
    [[1.0, 0, 0, 0], [0.562, 0.438, 0, 0], [0.343, 0.382, 0.275, 0], [0.282, 0.187, 0.318, 0.213]]
)  # head 2's weights, given directly
W_O = torch.tensor(
    [[0.5, 0.3, 0.2, 0.0], [0.1, 0.6, 0.1, 0.2], [0.0, 0.2, 0.5, 0.3], [0.4, 0.0, 0.2, 0.4]]
)

# %% [markdown]
# ## Masked attention of head 1

# %%
print("the equation:", code("src/nlpzoo/models/transformer_blocks.py", "attention"))
print("the mask:", code("src/nlpzoo/models/transformer_blocks.py", "causal_mask"))
mask = causal_mask(4)
show("mask (True: may look)", mask.int())
show("Q Kᵀ", Q1 @ K1.T)
Z1, A1 = attention(Q1, K1, V1, mask, scale=False)
show("softmax(Q Kᵀ + M), no scaling", A1)
show("Z_1 = A V", Z1)
Z1_scaled, A1_scaled = attention(Q1, K1, V1, mask)  # what the project computes
show("softmax(Q Kᵀ / √2 + M), as the project computes it", A1_scaled)
show("Z_1 with scaling", Z1_scaled)

# %% [markdown]
# The example's Z_1 rows 3 and 4 ([0.4858, 0.3746], [0.4524, 0.4464]) differ from the above in
# the third decimal only because it multiplies weights rounded to three digits. Two real slips
# in the worked example at this step: it writes the row-wise softmax as
# 1 / (1 + e^−t), which is the logistic sigmoid (softmax is e^{s_j} / Σ_k e^{s_k}); and its first
# table of weights gives [0.24, 0.23, 0.26, 0.27] for "AI", while the scores [0.64, 0.63, 0.68,
# 0.62] give [0.249, 0.247, 0.259, 0.244], the figures it then uses for Z_1.

# %% [markdown]
# ## Head 2, concatenation and W^O, in the project's multi-head module
#
# The example gives head 2's weights but not its Q and K. One choice that produces exactly
# those weights: K_2 rows [0, 0], [1, 0], [0, 1], [α, 0] and Q_2 rows made of the log-ratios of
# the given weights (any per-row constant leaves a softmax unchanged). The module's
# `MultiHeadAttention.attend` takes keys and values directly; its query projection is set to
# √d_k · I so that, after the module's division by √d_k, the scores are the unscaled Q Kᵀ.

# %%
a = A2_GIVEN
Q2 = torch.zeros(4, 2)
Q2[1, 0] = math.log(a[1, 1] / a[1, 0])
Q2[2] = torch.tensor([math.log(a[2, 1] / a[2, 0]), math.log(a[2, 2] / a[2, 0])])
Q2[3] = torch.tensor([math.log(a[3, 1] / a[3, 0]), math.log(a[3, 2] / a[3, 0])])
K2 = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
K2[3, 0] = math.log(a[3, 3] / a[3, 0]) / Q2[3, 0]
mha = CausalSelfAttention(d_model=4, heads=2)
with torch.no_grad():
    mha.W_q.weight.copy_(math.sqrt(2) * torch.eye(4))
    mha.W_q.bias.zero_()
    mha.W_o.weight.copy_(W_O.T)  # nn.Linear computes x Wᵀ: the example's Z · W^O
    mha.W_o.bias.zero_()
print("heads:", code("src/nlpzoo/models/transformer_blocks.py", "MultiHeadAttention.attend"))
x_q = torch.cat([Q1, Q2], 1)[None]  # (1, 4, 4): the queries of both heads side by side
k = torch.stack([K1, K2])[None]  # (1, 2, 4, 2)
v = torch.stack([V1, V2])[None]
out, weights = mha.attend(x_q, k, v, causal_mask(4))
show("head 2 weights from Q_2, K_2", weights[0, 1])
show("Z_2", weights[0, 1] @ V2)
Z_concat = torch.cat([Z1, weights[0, 1] @ V2], 1)
show("Concat(Z_1, Z_2)", Z_concat)
show("MultiHead = Concat · W^O (module output)", out[0])
mha_out = out[0].detach()

# %% [markdown]
# ## Add & Norm
#
# The example prints a "normalised" first row [1.12, 0.45, −1.34, 0.77] without computing it;
# a layer-normalised row has mean 0 and variance 1, and that row sums to 1.0. The project's
# `Block` wraps every sub-layer as LayerNorm(x + sublayer(x)); with γ = 1, β = 0:

# %%
print("Add & Norm:", code("src/nlpzoo/models/transformer_blocks.py", "Block._out"))
residual = X + mha_out
show("X + MultiHead", residual)
ln = torch.nn.LayerNorm(4)
out1 = ln(residual).detach()
show("LayerNorm(X + MultiHead)", out1)
show("row means", out1.mean(1))
show("row variances", out1.var(1, unbiased=False))

# %% [markdown]
# ## Cross-attention over the encoder's output
#
# The example uses its layer-norm output directly as queries and the encoder output
# ("我 爱 AI", 3 × 4) directly as keys and values, in one head of 4 and without scaling. For the
# query row [1.12, 0.45, −1.34, 0.77] it finds weights ≈ [0.12, 0.58, 0.30] (exactly 0.124,
# 0.569, 0.307) and, from those rounded weights, a first row [0.554, 0.534, 0.430, 0.670];
# every row is computed here from the example's own inputs.

# %%
ENC = torch.tensor([[0.5, 0.3, 0.9, 0.2], [0.8, 0.6, 0.4, 0.7], [0.1, 0.5, 0.3, 0.8]])
OUT1_GIVEN = torch.tensor(
    [
        [1.12, 0.45, -1.34, 0.77],
        [0.85, 0.72, -1.21, 0.64],
        [-0.62, 1.38, -0.85, 0.09],
        [-0.35, 1.05, 0.18, -0.88],
    ]
)
cross, cross_w = attention(OUT1_GIVEN, ENC, ENC, scale=False)  # no mask: every source word
show("scores Q Kᵀ", OUT1_GIVEN @ ENC.T)
show("weights", cross_w)
show("Cross_Out", cross)

# %% [markdown]
# The example's rows 2 to 4 of Cross_Out ([0.620, 0.480, 0.510, 0.590], …) are not what its
# inputs give: compare with the three last rows above.

# %% [markdown]
# ## The feed-forward network
#
# d_ff = 8, the example's W_1, b_1, W_2, b_2 applied to its Out2 (this step's arithmetic in
# the example is right).

# %%
OUT2 = torch.tensor(
    [
        [0.85, 0.50, -0.75, 1.20],
        [0.90, 0.70, -0.60, 1.10],
        [0.40, 1.00, -0.40, 0.80],
        [0.60, 0.90, -0.20, 0.70],
    ]
)
W1 = torch.tensor(
    [
        [0.1, 0.2, 0.3, 0.0, 0.1, -0.1, 0.2, 0.0],
        [0.0, 0.1, -0.1, 0.2, 0.3, 0.0, 0.1, 0.2],
        [0.2, 0.0, 0.1, -0.1, 0.0, 0.2, 0.3, 0.1],
        [0.1, -0.1, 0.0, 0.2, 0.1, 0.0, -0.1, 0.3],
    ]
)
B1 = torch.tensor([0.1, 0.0, 0.1, -0.1, 0.0, 0.1, 0.0, -0.1])
W2 = torch.tensor(
    [
        [0.1, 0.2, 0.0, 0.1],
        [0.0, 0.1, 0.2, 0.0],
        [0.2, 0.0, 0.1, 0.2],
        [0.1, 0.1, 0.0, 0.3],
        [0.0, 0.2, 0.1, 0.0],
        [0.3, 0.0, 0.1, 0.2],
        [0.1, 0.2, 0.0, 0.1],
        [0.0, 0.1, 0.2, 0.0],
    ]
)
B2 = torch.tensor([0.1, 0.0, 0.1, -0.1])
ffn = FeedForward(4, 8)
with torch.no_grad():
    ffn.W_1.weight.copy_(W1.T)
    ffn.W_1.bias.copy_(B1)
    ffn.W_2.weight.copy_(W2.T)
    ffn.W_2.bias.copy_(B2)
print("FFN:", code("src/nlpzoo/models/transformer_blocks.py", "FeedForward.forward"))
hidden = ffn.W_1(OUT2).detach()
show("x W_1 + b_1", hidden)
show("ReLU", hidden.clamp(min=0))
ffn_out = ffn(OUT2).detach()
show("FFN(x)", ffn_out)

# %% [markdown]
# ## The full run
#
# `transformer`, the encoder–decoder, on Multi30k de→en: d_model 128, 2 + 2 layers, 4 heads.

# %%
FULL = full_run(
    "transformer",
    [
        "bleu_tok_lc_beam",
        "bleu_beam",
        "chrf_beam",
        "test_ppl",
        "params",
        "cost_per_token",
        "epochs",
    ],
)
RESULTS = {
    "A1": A1.tolist(),
    "Z1": Z1.tolist(),
    "A1_scaled": A1_scaled.tolist(),
    "Z1_scaled": Z1_scaled.tolist(),
    "A2": weights[0, 1].tolist(),
    "mha_out": mha_out.tolist(),
    "out1": out1.tolist(),
    "cross_weights": cross_w.tolist(),
    "cross_out": cross.tolist(),
    "ffn_out": ffn_out.tolist(),
    "inputs": {
        "X": X.tolist(),
        "Q1": Q1.tolist(),
        "K1": K1.tolist(),
        "V1": V1.tolist(),
        "V2": V2.tolist(),
        "A2_given": A2_GIVEN.tolist(),
        "W_O": W_O.tolist(),
        "enc": ENC.tolist(),
        "out1_given": OUT1_GIVEN.tolist(),
        "out2": OUT2.tolist(),
        "W1": W1.tolist(),
        "b1": B1.tolist(),
        "W2": W2.tolist(),
        "b2": B2.tolist(),
    },
    "full_run": FULL,
}
__all__ = ["REFERENCES", "RESULTS", "np"]
