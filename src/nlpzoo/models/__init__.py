"""The model families' code, one file per family. Each family's record (`nlpzoo.families.NAME`)
names its config, its model class, its task, the input its loader yields, how it is fitted, and
which optional parts of the contract below the class has; the run lifecycle (`nlpzoo.lifecycle`)
calls exactly those, and never asks a model what it has.

Every model class:

    def __init__(self, config, vocab_size, counts=None)  # counts: training count per id (neural)
    def cost(vocab_size) -> nlpzoo.cost.Cost | None      # Q, multiply-adds per training token

Fitted by Lightning (`fit: lightning`): an `nn.Module` called on a batch of its task,
`forward(*batch) -> (logits, loss)`, with the training loss (the run's Adam or SGD is built from
the config: `optimizer`, `lr`, `weight_decay`, `adam_beta1`, `adam_beta2`, `adam_eps`, and
optionally `lr_decay` or `warmup_steps`). Optional, as the record says:

    stateful        forward(inputs, targets, state) -> (logits, loss, state);
                    detach_state(state) (recurrent models, truncated BPTT)
    vectors         embeddings() -> (V, d) word vectors: written to vectors.txt and scored by the
                    word-vector protocol
    own_optimizer   configure_optimizers(total_steps): the model's own rule and schedule
    manual_step     manual_step(batch, progress, progress_end) -> (Σ loss, predictions): its own
                    in-place update, used in a single process (progress, progress_end: the
                    fraction of the run done before and after the step)
    attention_maps  cross_attention(src, tgt_in) -> (B, T, S) (translation)

Fitted without gradient steps (`fit: count` or `closed_form`): `fit(*arrays) -> self`,
`num_parameters()`, `save(path)`, `load(path)` (a classmethod), and for a count language model
`log_probs(stream)`.

Language models (task "lm"): `token_log_probs(inputs, targets[, state])`, exact (normalised over
the whole vocabulary, whatever the output layer), is what perplexity is computed from. Input
`window`: inputs (B, n-1), targets (B,); `stream`: inputs (B, T), targets (B, T) = inputs shifted
by one token; a fixed-context (block) model also takes `start`: the targets from position `start`
on, every position still attending to the whole window.

Translation (task "mt") takes padded id batches (`nlpzoo.data.mt`): `forward(src, tgt_in,
labels=None) -> (logits (B, T, V), loss)`, and for decoding (`nlpzoo.evaluation.decoding`)
`config` (beam_size, length_penalty, max_len_ratio), `START`, `start(src) -> state` and
`step(state, tokens) -> (log_probs, state)`, where `state` is a nest of dicts, lists and tuples of
tensors whose first dimension is the row (one row per hypothesis), so decoding can reorder the
rows (beam search) and drop those of finished sentences by selecting rows of every tensor,
without a method per family.

Word vectors (task "vectors") have no held-out objective: word2vec (input "pairs": contexts and
centres from the token stream, or chunks of it for its compiled kernel), GloVe (input "cooccur":
entries of the co-occurrence matrix) and PPMI-SVD (closed form on the same entries).
"""
