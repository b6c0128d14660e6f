# %% [markdown]
# # 6. Bahdanau attention: the decoder looks back at every source word
#
# The seq2seq decoder gets one vector for the whole sentence. RNNsearch keeps one annotation per
# source word, h_j = [→h_j ; ←h_j] from a bidirectional RNN, and at each step i scores them all
# against the previous decoder state s_{i−1}:
#
#     e_ij = v_aᵀ tanh(W_a s_{i−1} + U_a h_j)      additive score
#     α_ij = softmax_j(e_ij),   c_i = Σ_j α_ij h_j  weights and context vector
#     s_i  = RNN([E y_{i−1} ; c_i], s_{i−1}),     p(y_i | …) = softmax(W_o [E y_{i−1} ; s_i ; c_i])
#
# First the score, weights and context by hand on three source words, then every shape of the
# project's `Bahdanau` model with the sizes of a typical worked example.

# %%
import numpy as np
import torch
from _common import REFERENCES, code, full_run, show

from nlpzoo.families.attention import AttentionConfig
from nlpzoo.models.attention import AdditiveAttention, Bahdanau

torch.set_default_dtype(torch.float64)
torch.set_grad_enabled(False)  # forward passes only; a cell that needs gradients asks for them
# decoder state of 2 units, annotations of 2 + 2 (two directions), alignment size A = 3
s_prev = torch.tensor([[0.5, -0.2]])
ann = torch.tensor([[[0.1, 0.4, -0.3, 0.2], [0.6, -0.1, 0.2, 0.0], [-0.2, 0.3, 0.5, 0.1]]])
W_a = torch.tensor([[0.3, -0.2], [0.1, 0.4], [-0.5, 0.2]])  # A × H
U_a = torch.tensor([[0.2, 0.0, -0.1, 0.3], [-0.3, 0.2, 0.1, 0.0], [0.1, 0.1, 0.4, -0.2]])
b_U = torch.tensor([0.0, 0.1, -0.1])
v_a = torch.tensor([[0.7, -0.5, 0.4]])
att = AdditiveAttention(state_dim=2, annotation_dim=4, attn_dim=3)
with torch.no_grad():
    att.W_a.weight.copy_(W_a)
    att.U_a.weight.copy_(U_a)
    att.U_a.bias.copy_(b_U)
    att.v_a.weight.copy_(v_a)

# %%
print("keys U_a h_j:", code("src/nlpzoo/models/attention.py", "AdditiveAttention.keys"))
keys = att.keys(ann)
show("U_a h_j + b (one row per source word)", keys[0])
show("W_a s_{i−1}", s_prev[0] @ W_a.T)
pre = torch.tanh(s_prev @ W_a.T + keys[0])
show("tanh(W_a s + U_a h_j)", pre)
e_hand = (pre @ v_a.T).squeeze(-1)
show("e_j = v_aᵀ tanh(…)", e_hand)
print("weights and context:", code("src/nlpzoo/models/attention.py", "AdditiveAttention.forward"))
mask = torch.tensor([[True, True, True]])
context, alpha = att(s_prev, keys, ann, mask)
show("α (module)", alpha[0])
show("c = Σ α_j h_j (module)", context[0])
# a padded source: the third position is padding and gets exactly zero weight
context_pad, alpha_pad = att(s_prev, keys, ann, torch.tensor([[True, True, False]]))
show("α with the third word masked as padding", alpha_pad[0])

# %% [markdown]
# ## The shapes at full size
#
# A GRU of 128 units per direction (annotations of 256), an alignment layer of 64, embeddings of
# 100, a source of 10 words and 10,000 target words: the decoder's input is 100 + 256 = 356
# numbers and its output layer reads 100 + 128 + 256 = 484.

# %%
cfg = AttentionConfig(emb_dim=100, hidden_dim=128, attn_dim=64, cell="gru", maxout=0, dropout=0.0)
torch.manual_seed(0)
model = Bahdanau(cfg, vocab_size=10_000).eval()
src = torch.randint(4, 10_000, (1, 10))
print("encoder:", code("src/nlpzoo/models/attention.py", "Bahdanau.encode"))
state = model.encode(src)
print("decoding:", code("src/nlpzoo/models/attention.py", "Bahdanau.decode_teacher_forced"))
tgt_in = torch.tensor([[1, 17, 42]])  # <s> and two target pieces
logits, alphas = model.decode_teacher_forced(src, tgt_in)
alpha_full = alphas[:, 0]  # the first step's weights over the 10 source words
SHAPES = {
    "annotations": list(state["ann"].shape),
    "keys": list(state["keys"].shape),
    "s0": list(state["s"].shape),
    "alpha": list(alpha_full.shape),
    "alphas": list(alphas.shape),
    "cell_input": model.cell.input_size,
    "output_input": model.out.in_features,
    "logits": list(logits.shape),
}
for k, v in SHAPES.items():
    print(f"  {k:<13} {v}")
print(f"α sums to {float(alpha_full.sum()):.6f}")
q = model.cost(10_000)
print(code("src/nlpzoo/models/attention.py", "Bahdanau.cost"))
print(f"  {q.formula}\n  {q.terms}: Q = {q.multiply_adds:,}")

# %% [markdown]
# ## The full run
#
# `attention` on Multi30k de→en: GRU 128, attention 64, beam 5.

# %%
FULL = full_run(
    "attention",
    ["bleu_tok_lc_beam", "bleu_beam", "chrf_beam", "test_ppl", "params", "epochs", "train_seconds"],
)
RESULTS = {
    "s_prev": s_prev[0].tolist(),
    "annotations": ann[0].tolist(),
    "W_a": W_a.tolist(),
    "U_a": U_a.tolist(),
    "b_U": b_U.tolist(),
    "v_a": v_a[0].tolist(),
    "scores": e_hand.tolist(),
    "alpha": alpha[0].tolist(),
    "context": context[0].tolist(),
    "alpha_masked": alpha_pad[0].tolist(),
    "shapes": SHAPES,
    "cost": q.multiply_adds,
    "full_run": FULL,
}
__all__ = ["REFERENCES", "RESULTS", "np"]
