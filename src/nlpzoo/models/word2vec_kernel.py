"""Word2vec's compiled per-pair kernel: CBOW and skip-gram, negative sampling and hierarchical
softmax, one SGD step per (input, target) pair, as word2vec.c's TrainModelThread does it.

`train_range` walks raw positions [lo, hi) of a token stream (sentences of ids, each followed
by `</s>`) and trains in place on the weight arrays (NumPy views of the model's tensors):

    sentence    the raw tokens up to the next `</s>`; a token w is kept with probability
                p_keep(w) (word2vec.c's sub-sampling, `nlpzoo.data.word2vec.keep_probability`,
                0 for the specials), drawn before any window is formed, so windows reach past
                discarded tokens and never cross a sentence end
    centre      every kept token j draws its window b uniform in 1..window (the dynamic window);
                its contexts are the kept tokens at positions j±1..j±b of the sentence
    CBOW        h = mean of the contexts (nothing happens without one); one pair (h, centre)
    skip-gram   for each context c, left to right: one pair (h = v_c, centre), the orientation
                of word2vec.c and gensim
    pair        neu1e = 0; for each output row u (the centre's Huffman path, root first, or the
                centre then `negative` noise words ~ count^0.75, a noise word equal to the centre
                skipped): f = u·h, g = (label − σ(f))·α (label 1 for the centre and code bit 0,
                0 for noise words and bit 1), neu1e += g·u, then u += g·h. After the last row
                neu1e is added to v_c (skip-gram) or, whole, to every context vector (CBOW).
                That is the reference's order: each output row is updated as soon as it is
                scored, the input vectors once the pair is done.
    rate        α falls linearly from alpha_lo at lo to alpha_hi at hi (set per sentence, where
                word2vec.c sets it every 10,000 words), never below min_alpha

Departures from word2vec.c, all deliberate: σ(f) and log σ(f) are interpolated linearly in
tables of 256 points per unit on [−8, 8] (error below 1e-6; exact formulas outside), where
word2vec.c looks σ up in 1,000 steps on [−6, 6]; a hierarchical-softmax node with |f| ≥ `max_exp`
(word2vec.c's MAX_EXP, 6) is skipped as in the tool, while negative sampling uses σ everywhere
(word2vec.c clips g at |f| > 6, which σ already matches within 0.25 %); sentences are not cut
at 1,000 words; noise words come from Walker's alias table (exact) rather than a 10^8-entry
table; random numbers are word2vec.c's linear congruential generator
(x ← x·25214903917 + 11 mod 2^64), read from its high bits, drawn in this order: sub-sampling
while a sentence is read, then every centre's window, then a centre's noise words (for all its
pairs) just before the previous centre is trained.

Speed: at d = 100 a pair costs a few dot products, but the rows it touches are scattered over
two V×d matrices larger than the caches, so the time goes into waiting for memory. While centre
j is trained, the rows centre j + 1 will need (its contexts, its Huffman path or its target and
noise words) are prefetched (LLVM's prefetch intrinsic), and the tables are kept small (int32,
int8, float32). The hottest output rows are not prefetched (HOT_ROWS): the tree's nodes nearest
the root, on nearly every path, and the most frequent words' rows. Measurements:
docs/benchmarks.md ("Word vectors").

The loss of a row is −log σ(f) (label 1) or −log σ(−f) (label 0); `train_range` returns the sum
over the rows it scored and the number of pairs (so loss_sum / pairs is the mean loss per
pair). Hierarchical-softmax rows skipped by `max_exp` still count their loss.

`train_range` can also record what it drew (record mode, arrays with rows; the tests read them):
per pair the contexts in their window slots, the centre, the noise words and α; and per word the
number of tokens kept. Recording changes nothing else: the same draws, the same updates.

The Python side (the tables in compact types, the pieces of a range and the threads that train
them) is nlpzoo.models.word2vec_threads.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from nlpzoo.data.vocab import EOS

# output rows not prefetched: the tree's HOT_ROWS nodes nearest the root, and the rows of the
# ids below HOT_ROWS (after the specials, the most frequent words); they stay in the cache of a
# single thread, and with several threads a prefetch of a row the other thread keeps writing only
# adds coherence traffic
HOT_ROWS = 64

MAX_EXP = 6.0  # word2vec.c: hierarchical-softmax nodes with |u·h| >= 6 are not updated

# word2vec.c's linear congruential generator, x ← a·x + c mod 2^64
_A = np.uint64(25214903917)
_C = np.uint64(11)
_S24 = np.uint64(40)  # a uniform in [0, 1) from the top 24 bits
_S32 = np.uint64(32)
_INV24 = 1.0 / 16777216.0

# reassociation lets LLVM vectorise the dot products; no assumption about NaN or infinity
_FAST = {"nsz", "arcp", "contract", "reassoc"}

# σ(x) and −log σ(x) = log(1 + e^−x) on a grid of ±TABLE_RANGE, interpolated linearly: a
# table lookup costs a fraction of exp() and log1p(), which would take a third of a row's time
TABLE_RANGE = 8.0
_STEPS_PER_UNIT = 256.0
_GRID = -TABLE_RANGE + np.arange(int(2 * TABLE_RANGE * _STEPS_PER_UNIT) + 2) / _STEPS_PER_UNIT
_SIGMOID = 1.0 / (1.0 + np.exp(-_GRID))
_SOFTPLUS = np.log1p(np.exp(-_GRID))


@njit(inline="always")
def _next(state):
    return state * _A + _C


@njit(inline="always")
def _uniform(state):
    """A uniform in [0, 1) from the generator's top 24 bits."""
    return np.float64(state >> _S24) * _INV24


@njit(inline="always")
def _below(state, n):
    """An integer uniform in 0..n−1 from the top 32 bits (multiply-shift, n < 2^32)."""
    return np.int64(((state >> _S32) * np.uint64(n)) >> _S32)


@njit(inline="always")
def _sigmoid_softplus(x):
    """(σ(x), −log σ(x)): linear interpolation in the tables inside ±TABLE_RANGE (error below
    1e-6), the exact formulas outside."""
    if -TABLE_RANGE < x < TABLE_RANGE:
        t = (x + TABLE_RANGE) * _STEPS_PER_UNIT
        i = np.int64(t)
        w = t - i
        sig = _SIGMOID[i] + w * (_SIGMOID[i + 1] - _SIGMOID[i])
        sp = _SOFTPLUS[i] + w * (_SOFTPLUS[i + 1] - _SOFTPLUS[i])
        return sig, sp
    e = np.exp(-x)
    return 1.0 / (1.0 + e), np.log1p(e)


@njit(inline="always")
def _row(hm, hr, syn1, row, label, neu1e, alpha, skip_beyond):
    """Scores output row `row` against h = hm[hr], adds g·u to neu1e and g·h to the row (in
    this order); returns the row's loss. `skip_beyond` > 0: no update when |u·h| >= it (the
    hierarchical softmax of word2vec.c)."""
    d = neu1e.shape[0]
    f = np.float32(0.0)
    for c in range(d):
        f += hm[hr, c] * syn1[row, c]
    x = np.float64(f)
    sig, loss = _sigmoid_softplus(x)  # loss = −log σ(x)
    if label == 0:
        loss += x  # −log σ(−x) = −log σ(x) + x
    if skip_beyond > 0.0 and abs(x) >= skip_beyond:
        return loss
    g = np.float32((label - sig) * alpha)
    # one pass: neu1e takes g·u with the row's old value, then the row moves (word2vec.c's
    # two loops, element by element the same); reading the row once is faster, and the row is
    # written sooner after it was read (another thread updating it meanwhile is lost less often)
    for c in range(d):
        u = syn1[row, c]
        neu1e[c] += g * u
        syn1[row, c] = u + g * hm[hr, c]
    return loss


@intrinsic
def _prefetch(typingctx, arr, row, col):
    """Asks the CPU to fetch arr[row, col]'s cache line (LLVM's prefetch: read, keep in all
    cache levels); no effect on the result."""

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        index = [
            context.cast(builder, v, t, types.intp)
            for v, t in zip(args[1:], signature.args[1:], strict=True)
        ]
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, index, wraparound=False)
        i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return types.void(arr, row, col), codegen


@njit(inline="always")
def _prefetch_row(arr, row):
    d = arr.shape[1]
    for c in range(0, d, 16):  # 16 floats: one 64-byte cache line
        _prefetch(arr, row, c)
    _prefetch(arr, row, d - 1)


@njit(inline="always")
def _prepare(
    j, sen, n, bsen, syn0, syn1, cbow, hs, points, lengths, threshold, alias, negative, noise,
    slot, state,
):  # fmt: skip
    """Before centre j is trained: draws its noise words (negative sampling, one row of
    noise[slot] per pair) and prefetches every row it will read. Returns the generator state."""
    b = bsen[j]
    first, last = max(j - b, 0), min(j + b, n - 1)
    for k in range(first, last + 1):
        if k != j:
            _prefetch_row(syn0, sen[k])
    centre = sen[j]
    if hs:
        top = syn1.shape[0] - HOT_ROWS  # nodes above it: near the root, on most paths
        for p in range(lengths[centre]):
            if points[centre, p] < top:
                _prefetch_row(syn1, points[centre, p])
    elif negative > 0 and last > first:
        if centre >= HOT_ROWS:
            _prefetch_row(syn1, centre)
        V = threshold.shape[0]
        pairs = 1 if cbow else last - first
        for q in range(pairs):
            for k in range(negative):
                state = _next(state)
                i = _below(state, V)
                state = _next(state)
                w = i if _uniform(state) < threshold[i] else alias[i]
                noise[slot, q, k] = w
                if w >= HOT_ROWS:
                    _prefetch_row(syn1, w)
    return state


@njit(inline="always")
def _output(
    hm, hr, centre, neu1e, syn1, hs, points, codes, lengths, noise, slot, q, alpha, max_exp
):
    """The output layer for one pair (h = hm[hr], centre): the centre's Huffman path, or the
    centre and its noise words noise[slot, q] (one equal to the centre is skipped, as in
    word2vec.c). Returns the summed loss."""
    loss = 0.0
    if hs:
        for p in range(lengths[centre]):
            loss += _row(
                hm, hr, syn1, points[centre, p], 1 - codes[centre, p], neu1e, alpha, max_exp
            )
    else:
        loss += _row(hm, hr, syn1, centre, 1, neu1e, alpha, 0.0)
        for k in range(noise.shape[2]):
            w = noise[slot, q, k]
            if w != centre:
                loss += _row(hm, hr, syn1, w, 0, neu1e, alpha, 0.0)
    return loss


@njit(nogil=True, cache=True, fastmath=_FAST)
def train_range(
    tokens,
    lo,
    hi,
    p_keep,
    syn0,
    syn1,
    points,
    codes,
    lengths,
    threshold,
    alias,
    cbow,
    hs,
    window,
    negative,
    alpha_lo,
    alpha_hi,
    min_alpha,
    max_exp,
    seed,
    rec_inputs,
    rec_targets,
    rec_noise,
    rec_alpha,
    rec_kept,
):
    """Trains on raw positions [lo, hi) of `tokens` in place (see the module docstring).

    syn0 (V, d) input vectors, syn1 (V, d) or (V−1, d) output vectors, both float32 C-contiguous;
    points/codes (V, L) and lengths (V,) the Huffman tree (hs), threshold/alias (V,) the noise
    alias table (negative sampling); the unused ones may be empty. `seed` starts the generator.
    Record mode when rec_targets has rows: rec_inputs (R, 2·window) gets each pair's contexts in
    their slots (offsets −window..−1, 1..window; −1 elsewhere), rec_targets (R,) the centre,
    rec_noise (R, negative) its noise words, rec_alpha (R,) the rate; and when rec_kept has
    rows (V,), it counts the kept tokens. Returns (loss sum, pairs, rows recorded, final
    generator state).
    """
    d = syn0.shape[1]
    record = rec_targets.shape[0] > 0
    count_kept = rec_kept.shape[0] > 0
    sen = np.empty(max(hi - lo, 1), np.int64)
    bsen = np.empty(max(hi - lo, 1), np.int64)
    # noise words of the centre being trained and of the next one (slots j % 2), per pair
    noise = np.zeros((2, 1 if cbow else 2 * window, negative if not hs else 0), np.int64)
    neu1 = np.zeros((1, d), np.float32)  # CBOW's h, as row 0
    neu1e = np.zeros(d, np.float32)
    state = np.uint64(seed)
    span = max(hi - lo, 1)
    loss = 0.0
    pairs = 0
    nrec = 0
    pos = lo
    while pos < hi:
        alpha = alpha_lo + (alpha_hi - alpha_lo) * ((pos - lo) / span)
        if alpha < min_alpha:
            alpha = min_alpha
        # one sentence, sub-sampled
        n = 0
        while pos < hi:
            w = tokens[pos]
            pos += 1
            if w == EOS:
                break
            keep = p_keep[w]
            if keep < 1.0:
                state = _next(state)
                if _uniform(state) >= keep:
                    continue
            sen[n] = w
            n += 1
            if count_kept:
                rec_kept[w] += 1
        # every centre's window, then the centres in order; centre j + 1's noise words are
        # drawn and its rows prefetched before centre j is trained
        for j in range(n):
            state = _next(state)
            bsen[j] = 1 + _below(state, window)
        if n > 0:
            state = _prepare(
                0, sen, n, bsen, syn0, syn1, cbow, hs, points, lengths, threshold, alias,
                negative, noise, 0, state,
            )  # fmt: skip
        for j in range(n):
            if j + 1 < n:
                state = _prepare(
                    j + 1, sen, n, bsen, syn0, syn1, cbow, hs, points, lengths, threshold,
                    alias, negative, noise, (j + 1) % 2, state,
                )  # fmt: skip
            slot = j % 2
            centre = sen[j]
            b = bsen[j]
            first = max(j - b, 0)
            last = min(j + b, n - 1)
            if last == first:
                continue  # no context
            if cbow:
                for c in range(d):
                    neu1[0, c] = 0.0
                    neu1e[c] = 0.0
                for k in range(first, last + 1):
                    if k != j:
                        for c in range(d):
                            neu1[0, c] += syn0[sen[k], c]
                inv = np.float32(1.0 / (last - first))
                for c in range(d):
                    neu1[0, c] *= inv
                if record:
                    _record(rec_inputs, rec_targets, rec_noise, rec_alpha, nrec, sen, j, first,
                            last, -1, window, alpha, noise, slot, 0)  # fmt: skip
                    nrec += 1
                loss += _output(
                    neu1, 0, centre, neu1e, syn1, hs, points, codes, lengths, noise, slot, 0,
                    alpha, max_exp,
                )  # fmt: skip
                pairs += 1
                for k in range(first, last + 1):
                    if k != j:
                        for c in range(d):
                            syn0[sen[k], c] += neu1e[c]
            else:
                q = 0
                for k in range(first, last + 1):
                    if k == j:
                        continue
                    ctx = sen[k]
                    for c in range(d):
                        neu1e[c] = 0.0
                    if record:
                        _record(rec_inputs, rec_targets, rec_noise, rec_alpha, nrec, sen, j,
                                first, last, k, window, alpha, noise, slot, q)  # fmt: skip
                        nrec += 1
                    loss += _output(
                        syn0, ctx, centre, neu1e, syn1, hs, points, codes, lengths, noise, slot,
                        q, alpha, max_exp,
                    )  # fmt: skip
                    pairs += 1
                    q += 1
                    for c in range(d):
                        syn0[ctx, c] += neu1e[c]
    return loss, pairs, nrec, state


@njit(inline="always")
def _record(
    rec_inputs, rec_targets, rec_noise, rec_alpha, r, sen, j, first, last, only, window, alpha,
    noise, slot, q,
):  # fmt: skip
    """Record mode: row r gets the pair's contexts in their window slots (all of first..last
    but j, or only position `only` when it is >= 0), the centre, its noise words and α."""
    rec_targets[r] = sen[j]
    rec_alpha[r] = alpha
    for k in range(first, last + 1):
        if k != j and (only < 0 or k == only):
            off = k - j
            rec_inputs[r, off + window if off < 0 else off + window - 1] = sen[k]
    for k in range(noise.shape[2]):
        rec_noise[r, k] = noise[slot, q, k]
