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

from nlpzoo.models import (
    attention,
    decoder_mt,
    glove,
    ngram,
    nnlm,
    rnn_lm,
    seq2seq,
    svd,
    transformer,
    transformer_lm,
    word2vec,
)

FAMILIES = {
    "ngram": (ngram.Config, ngram.KneserNey),
    "nnlm": (nnlm.Config, nnlm.NNLM),
    "rnn_lm": (rnn_lm.Config, rnn_lm.RNNLM),
    "transformer_lm": (transformer_lm.Config, transformer_lm.TransformerLM),
    "word2vec": (word2vec.Config, word2vec.Word2Vec),
    "glove": (glove.Config, glove.Glove),
    "svd": (svd.Config, svd.PPMISVD),
    "seq2seq": (seq2seq.Config, seq2seq.Seq2Seq),
    "attention": (attention.Config, attention.Bahdanau),
    "transformer": (transformer.Config, transformer.Transformer),
    "decoder_mt": (decoder_mt.Config, decoder_mt.DecoderMT),
}

# the data each family trains on and how it is scored
TASKS = {
    "ngram": "lm",
    "nnlm": "lm",
    "rnn_lm": "lm",
    "transformer_lm": "lm",
    "word2vec": "vectors",
    "glove": "vectors",
    "svd": "vectors",
    "seq2seq": "mt",
    "attention": "mt",
    "transformer": "mt",
    "decoder_mt": "mt",
}

# families trained with Lightning (the others fit in closed form or by counting)
NEURAL = {
    "nnlm",
    "rnn_lm",
    "transformer_lm",
    "word2vec",
    "glove",
    "seq2seq",
    "attention",
    "transformer",
    "decoder_mt",
}
