"""The model families: family name → (Config dataclass, model class). One file per family.

Contract of a language-model family (task "lm"), so the shared training and scoring code can run it:

    class Config:                      # dataclass; hyper-parameters incl. batch_size, optimizer,
                                       # lr, weight_decay (and lr_decay for sgd); checks in
                                       # __post_init__ via nlpzoo.config.require
    class Model(nn.Module):
        INPUT = "window" | "stream"    # fixed context windows (NNLM) or contiguous (B, T) blocks
        STATEFUL = False | True        # stream models whose state is carried across blocks (RNNs)
        def __init__(self, config, vocab_size, counts=None)   # counts: training count per id
        def forward(inputs, targets=None[, state]) -> (logits, loss[, state])
        def token_log_probs(inputs, targets[, state]) -> (log p of each target[, state])
        def embeddings() -> (V, d) input word vectors

`window`: inputs (B, n-1), targets (B,). `stream`: inputs (B, T), targets (B, T) = inputs shifted
by one token. `token_log_probs` is exact (normalised over the whole vocabulary), whatever the
output layer, and is what perplexity is computed from.

Translation families (task "mt") take padded id batches (`nlpzoo.data.mt`): `forward(src, tgt_in,
labels=None) -> (logits (B, T, V), loss)`, and for decoding (`nlpzoo.evaluation.decoding`) `START`,
`start(src) -> state` and `step(state, tokens) -> (log_probs, state)`, where `state` is a nest of
dicts, lists and tuples of tensors whose first dimension is the row (one row per hypothesis), so
decoding can reorder the rows (beam search) and drop those of finished sentences by selecting rows
of every tensor, without a method per family; the attention families add
`cross_attention(src, tgt_in) -> (B, T, S)`. Training and evaluation: `nlpzoo.mt_runner`.

Word-vector families (task "vectors") have `embeddings()` and no held-out objective: word2vec
(INPUT "pairs": contexts and centres from the token stream; its `train_step` is a closed-form SGD
step used instead of autograd in a single process), GloVe (INPUT "cooccur": entries of the
co-occurrence matrix) and PPMI-SVD (closed form: `fit(rows, cols, vals)`, `save`/`load`).
"""

from __future__ import annotations

from nlpzoo.families import FAMILIES as _REGISTRY

# compatibility views of the registry (nlpzoo.families)
FAMILIES = {name: (f.config, f.model_class()) for name, f in _REGISTRY.items()}
TASKS = {name: f.task for name, f in _REGISTRY.items()}
NEURAL = {name for name, f in _REGISTRY.items() if f.neural}
