# %% [markdown]
# # 8. Decoder-only: the output layer, the loss, and the prompt mask
#
# A decoder-only Transformer is the decoder of page 7 without cross-attention: masked
# self-attention and an FFN per block, then one output layer for every position,
#
#     logits_t = x_t Eᵀ + b        the output matrix is the (tied) embedding matrix E
#     loss     = mean_t −log softmax(logits_t)[y_t]
#
# All positions are trained at once: the causal mask makes position t see tokens ≤ t only. For
# translation (`decoder_mt`) source and target become one sequence `<s> x <sep> y`, and the
# positions of the prompt carry no label.

# %%
import numpy as np
import torch
import torch.nn.functional as F
from _common import REFERENCES, code, full_run, show

from nlpzoo.families.decoder_mt import DecoderMTConfig
from nlpzoo.families.transformer_lm import TransformerLMConfig
from nlpzoo.models.decoder_mt import IGNORE, DecoderMT, build_sequence
from nlpzoo.models.losses import label_smoothed_loss
from nlpzoo.models.transformer_lm import TransformerLM

torch.set_default_dtype(torch.float64)
torch.set_grad_enabled(False)  # forward passes only; a cell that needs gradients asks for them
VOCAB = ["<START>", "I", "love", "AI", "<EOS>", "<PAD>"]
DEC_OUT = torch.tensor(
    [
        [1.10, 0.70, -0.80, 1.40],
        [1.05, 0.85, -0.55, 1.25],
        [0.65, 1.15, -0.20, 1.00],
        [0.80, 1.05, -0.05, 0.90],
    ]
)
W_OUT = torch.tensor(
    [
        [0.2, 0.8, 0.1, 0.3, 0.5, 0.0],
        [0.4, 0.2, 0.9, 0.1, 0.3, 0.6],
        [0.1, 0.3, 0.2, 0.7, 0.4, 0.5],
        [0.6, 0.1, 0.3, 0.2, 0.8, 0.4],
    ]
)
B_OUT = torch.tensor([0.1, 0.0, 0.2, 0.1, 0.0, 0.3])
TARGETS = torch.tensor([1, 2, 3, 4])  # I, love, AI, <EOS>

cfg = TransformerLMConfig(
    d_model=4, heads=2, num_layers=1, d_ff=8, dropout=0.0, block_size=8, output="softmax"
)
lm = TransformerLM(cfg, vocab_size=6).eval()
with torch.no_grad():
    lm.tok_emb.weight.copy_(W_OUT.T)  # E (V × C); the output layer reads Eᵀ (C × V) = W_out
    lm.lm_head.bias.copy_(B_OUT)
print("weight tying:", code("src/nlpzoo/models/transformer_lm.py", "TransformerLM.__init__"))
print("the output matrix is the embedding:", lm.lm_head.weight is lm.tok_emb.weight)

# %% [markdown]
# ## Logits, probabilities, loss

# %%
print("logits:", code("src/nlpzoo/models/transformer_lm.py", "TransformerLM.forward"))
logits = lm.lm_head(DEC_OUT)
show("logits = Dec_Out · W_out + b", logits)
probs = torch.softmax(logits, -1)
show("softmax", probs)
for t in range(4):
    best = int(probs[t].argmax())
    print(
        f"  position {t} ({VOCAB[t]:>7}): argmax {VOCAB[best]:<7} {float(probs[t, best]):.3f}"
        f"; target {VOCAB[int(TARGETS[t])]:<5} p = {float(probs[t, TARGETS[t]]):.3f}"
    )
print("the loss:", code("src/nlpzoo/models/losses.py", "label_smoothed_loss"))
per_position = F.cross_entropy(logits, TARGETS, reduction="none").detach()
show("−log p(target) per position", per_position)
loss = label_smoothed_loss(logits[None], TARGETS[None], smoothing=0.0)
print(f"mean loss (module) = {float(loss):.4f}")

# %% [markdown]
# ## The gradient of one output weight
#
# ∂loss/∂logits = p − y (one-hot y), and logit (t, j) = Σ_c x_tc W_out[c, j] + b_j, so
# ∂loss_t/∂W_out[0, 0] = (p_t0 − y_t0) · x_t0. For position 0 alone that is 0.215 × 1.10 ≈ 0.236,
# the worked example's figure. The loss that is trained is the *mean* over the four positions,
# whose gradient averages the four terms; and with tied weights the same matrix also receives
# the gradient of the input embedding (not shown here: Dec_Out is given, not computed from E).

# %%
lm.zero_grad()
with torch.enable_grad():
    F.cross_entropy(lm.lm_head(DEC_OUT[:1]), TARGETS[:1]).backward()
grad_pos0 = float(lm.tok_emb.weight.grad[0, 0])
print(f"∂loss_0/∂W_out[0,0] = {grad_pos0:.4f}")
lm.zero_grad()
with torch.enable_grad():
    label_smoothed_loss(lm.lm_head(DEC_OUT)[None], TARGETS[None], smoothing=0.0).backward()
grad_mean = float(lm.tok_emb.weight.grad[0, 0])
print(f"∂(mean loss)/∂W_out[0,0] = {grad_mean:.4f}")

# %% [markdown]
# ## The causal mask makes every position a training example
#
# Changing the last input token changes no earlier position's output.

# %%
torch.manual_seed(0)
lm_rand = TransformerLM(cfg, vocab_size=6).eval()
a = torch.tensor([[0, 1, 2, 3]])
b = torch.tensor([[0, 1, 2, 5]])
la, _ = lm_rand(a)
lb, _ = lm_rand(b)
changed = [bool((la[0, t] - lb[0, t]).abs().max() > 1e-12) for t in range(4)]
print("logits changed at positions:", changed)

# %% [markdown]
# ## Decoder-only translation: one sequence, the prompt without labels

# %%
TOK = ["<unk>", "<s>", "</s>", "<pad>", "<sep>", "我", "爱", "AI", "I", "love"]
ID = {w: i for i, w in enumerate(TOK)}
src = torch.tensor([[ID["我"], ID["爱"], ID["AI"]]])
tgt_in = torch.tensor([[ID["<s>"], ID["I"], ID["love"], ID["AI"]]])
labels = torch.tensor([[ID["I"], ID["love"], ID["AI"], ID["</s>"]]])
print(code("src/nlpzoo/models/decoder_mt.py", "build_sequence"))
inputs, seq_labels = build_sequence(src, tgt_in, labels)
print("  inputs:", " ".join(TOK[i] for i in inputs[0].tolist()))
print("  labels:", " ".join("—" if i == IGNORE else TOK[i] for i in seq_labels[0].tolist()))
torch.manual_seed(0)
mt = DecoderMT(
    DecoderMTConfig(
        d_model=4, heads=2, num_layers=1, d_ff=8, dropout=0.0, label_smoothing=0.0, max_positions=16
    ),
    len(TOK),
).eval()
print(code("src/nlpzoo/models/decoder_mt.py", "DecoderMT.forward"))
_, mt_loss = mt(src, tgt_in, labels)
all_logits = mt.lm_logits(inputs)[0]
labelled = seq_labels[0] != IGNORE
manual = F.cross_entropy(all_logits[labelled], seq_labels[0][labelled])
everything = F.cross_entropy(all_logits[:-1], inputs[0, 1:])  # an LM loss on every position
print(
    f"prompt-masked loss (module) = {float(mt_loss):.6f}; over the labelled positions = "
    f"{float(manual):.6f}; counting the prompt too would give {float(everything):.6f}"
)

# %% [markdown]
# ## Cost and the full runs

# %%
print(code("src/nlpzoo/models/transformer_lm.py", "TransformerLM.cost"))
q = lm.cost(6)
print(f"  {q.formula}, {q.terms}: Q = {q.multiply_adds:,}")
FULL = {
    "transformer_lm": full_run(
        "transformer_lm",
        ["test_ppl", "valid_ppl", "params", "cost_per_token", "epochs", "train_seconds"],
    ),
    "decoder_mt": full_run(
        "decoder_mt", ["bleu_tok_lc_beam", "bleu_beam", "chrf_beam", "test_ppl", "params", "epochs"]
    ),
}
RESULTS = {
    "logits": logits.tolist(),
    "probs": probs.tolist(),
    "per_position": per_position.tolist(),
    "loss": float(loss),
    "grad_pos0": grad_pos0,
    "grad_mean": grad_mean,
    "causal_changed": changed,
    "sequence": inputs[0].tolist(),
    "sequence_labels": seq_labels[0].tolist(),
    "mt_loss": float(mt_loss),
    "mt_loss_labelled": float(manual),
    "mt_loss_everything": float(everything),
    "cost": q.multiply_adds,
    "inputs": {
        "dec_out": DEC_OUT.tolist(),
        "W_out": W_OUT.tolist(),
        "b_out": B_OUT.tolist(),
        "targets": TARGETS.tolist(),
    },
    "full_run": FULL,
}
__all__ = ["REFERENCES", "RESULTS", "np"]
