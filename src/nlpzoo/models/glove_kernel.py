"""GloVe's compiled per-entry kernel: AdaGrad on one non-zero X_ij at a time, as the reference
tool (glove.c) trains, with the accumulator conventions of `nlpzoo.models.glove.SparseAdagrad`.

`train_entries` visits entries order[lo], ..., order[hi − 1] of the matrix (rows, cols, vals)
and updates, in place, the tables of the model (NumPy views of its tensors): `word` rows
[w_i | b_i] and `context` rows [w̃_j | b̃_j] (V × (d+1), glove.c's layout), and their AdaGrad
accumulators G of the same shape (the optimizer's state). For entry (i, j, x):

    e   = w_iᵀ w̃_j + b_i + b̃_j − log x                     the residual
    f   = min(1, (x / x_max)^α)
    g   = f e w̃_j  for w_i,   f e w_i  for w̃_j,   f e  for b_i and b̃_j    (old values on both
          sides: w_i's step uses w̃_j before w̃_j's step, as in the tool)
    G  += (η g)² (tool) or g² (standard);   θ −= η g / √G              per coordinate

Every coordinate adds to G before its step (the project's rule, see SparseAdagrad; glove.c steps
first, then adds, so its very first step is η g where this one is η g / √(1 + η² g²): with
G ≈ 1 on Brown the two agree to a fraction of a percent). There is no gradient clipping, as on
the torch path (later releases of the tool clip every gradient coordinate at ±100, `-grad-clip`,
far beyond what f ≤ 1 and the small residuals of a fitted model produce), and a non-finite
residual is not skipped (the tool skips the entry): the loss becomes NaN and the run's
NonFiniteLoss callback stops it, as on the torch path. The cost returned is Σ ½ f e² over the
entries visited (the tool's cost; its mean per entry is the run's training loss).

Arithmetic is in float32 (the model's weights), the cost in float64. LLVM may reorder sums
(the dot product is vectorised) and fuse multiply-adds, so results differ from a sequential
float32 loop in the last bits.

Speed: an entry costs ~4·d multiply-adds and 2·d square roots, but it touches four scattered
rows (w_i, w̃_j and their G, 4·(d+1) floats) of tables that do not fit in the L2 cache, and its
(i, j, x) sits at a random place of the matrix (the order is a permutation). While entry k is
trained, the rows of entry k + ROW_AHEAD and the matrix cells of entry k + ENTRY_AHEAD are
prefetched (LLVM's prefetch intrinsic), so the memory latency overlaps the arithmetic.

Threads (`train_order`): the entries to visit are cut into `threads` consecutive parts, each
trained by its own Python thread calling `train_entries` (compiled with nogil, so the threads run
in parallel) on the same tables, without locks (Hogwild: Recht, Re, Wright & Niu 2011; what
glove.c's pthreads do). An update of one thread may overwrite a concurrent one of another on the
same row; with millions of entries over thousands of rows that is rare and harmless. With one
thread a run is deterministic.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from nlpzoo.models.pools import thread_pool

# reassociation lets LLVM vectorise the dot product and the updates; no assumption about NaN or
# infinity (a diverging run must still show a NaN loss)
_FAST = {"nsz", "arcp", "contract", "reassoc"}

ROW_AHEAD = 4  # the weight rows of entry k + ROW_AHEAD are prefetched while entry k trains
ENTRY_AHEAD = 16  # ... and the matrix cells (i, j, x) of entry k + ENTRY_AHEAD


@intrinsic
def _prefetch(typingctx, arr, index):
    """Asks the CPU to fetch arr[index...]'s cache line (LLVM's prefetch: read, keep in all cache
    levels); no effect on the result. `index` is a tuple of integers, one per dimension."""

    def codegen(context, builder, signature, args):
        aryty, idxty = signature.args
        ary = context.make_array(aryty)(context, builder, args[0])
        items = cgutils.unpack_tuple(builder, args[1], len(idxty))
        index = [context.cast(builder, v, t, types.intp) for v, t in zip(items, idxty, strict=True)]
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, index, wraparound=False)
        i8p, i32 = ir.IntType(8).as_pointer(), ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])
        return context.get_dummy_value()

    return types.void(arr, index), codegen


@njit(inline="always")
def _prefetch_row(arr, row):
    n = arr.shape[1]
    for c in range(0, n, 16):  # 16 floats: one 64-byte cache line
        _prefetch(arr, (row, c))
    _prefetch(arr, (row, n - 1))  # a row that does not start on a line ends on one more


@njit(nogil=True, cache=True, fastmath=_FAST, error_model="numpy")
def train_entries(
    word, context, gword, gcontext, rows, cols, vals, order, lo, hi, x_max, alpha, lr, tool
):
    """Trains on entries order[lo:hi] of (rows, cols, vals), in that order (module docstring).

    word, context, gword, gcontext: (V, d+1) float32, C-contiguous; rows, cols (N,) integer ids,
    vals (N,) float32 X_ij > 0; order (M,) integer entry numbers. `tool`: G adds (η g)² (glove.c's
    scaling), else g². Returns Σ ½ f e² over the entries (float64)."""
    d = word.shape[1] - 1
    lr32 = np.float32(lr)
    q2 = np.float32(lr * lr if tool else 1.0)  # G += q2 · g²
    inv_x_max = 1.0 / x_max
    cost = 0.0
    for k in range(lo, hi):
        if k + ENTRY_AHEAD < hi:
            a = order[k + ENTRY_AHEAD]
            _prefetch(rows, (a,))
            _prefetch(cols, (a,))
            _prefetch(vals, (a,))
        if k + ROW_AHEAD < hi:
            a = order[k + ROW_AHEAD]
            i, j = rows[a], cols[a]
            _prefetch_row(word, i)
            _prefetch_row(gword, i)
            _prefetch_row(context, j)
            _prefetch_row(gcontext, j)
        a = order[k]
        i, j, x = rows[a], cols[a], vals[a]
        dot = np.float32(0.0)
        for t in range(d):
            dot += word[i, t] * context[j, t]
        e = dot + word[i, d] + context[j, d] - np.log(x)  # float32
        ratio = np.float64(x) * inv_x_max
        f = np.float32(1.0) if ratio >= 1.0 else np.float32(ratio**alpha)
        fe = f * e  # float32
        cost += 0.5 * np.float64(fe) * np.float64(e)
        for t in range(d):
            w = word[i, t]
            c = context[j, t]
            g1 = fe * c  # ∂/∂w_i
            g2 = fe * w  # ∂/∂w̃_j
            G1 = gword[i, t] + q2 * g1 * g1
            G2 = gcontext[j, t] + q2 * g2 * g2
            gword[i, t] = G1
            gcontext[j, t] = G2
            word[i, t] = w - lr32 * (g1 / np.sqrt(G1))
            context[j, t] = c - lr32 * (g2 / np.sqrt(G2))
        # the biases: ∂/∂b_i = ∂/∂b̃_j = f e
        G1 = gword[i, d] + q2 * fe * fe
        G2 = gcontext[j, d] + q2 * fe * fe
        gword[i, d] = G1
        gcontext[j, d] = G2
        word[i, d] -= lr32 * (fe / np.sqrt(G1))
        context[j, d] -= lr32 * (fe / np.sqrt(G2))
    return cost


# ---------------------------------------------------------------------------------- Python side


def check_tables(*tables: np.ndarray) -> None:
    """The kernel writes into these in place, without bounds checks: float32, C-contiguous,
    all of one shape (V, d+1)."""
    shape = tables[0].shape
    for t in tables:
        if t.dtype != np.float32:
            raise TypeError(f"the kernel trains float32 tables, got {t.dtype}")
        if not t.flags.c_contiguous or not t.flags.writeable:
            raise ValueError("the tables must be writeable and C-contiguous")
        if t.shape != shape or t.ndim != 2 or shape[1] < 2:
            raise ValueError(f"the tables must all be (V, d+1), got {[x.shape for x in tables]}")


def train_order(
    word: np.ndarray,
    context: np.ndarray,
    gword: np.ndarray,
    gcontext: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
    vals: np.ndarray,
    order: np.ndarray,
    x_max: float,
    alpha: float,
    lr: float,
    tool: bool,
    threads: int = 1,
) -> float:
    """Trains on the entries `order` names, with `threads` Hogwild threads (each a consecutive
    part of `order`); returns Σ ½ f e² over them. The ids must lie in 0..V−1 (checked by the
    caller once per matrix: `check_ids`)."""
    check_tables(word, context, gword, gcontext)
    order = np.ascontiguousarray(order)
    if order.dtype not in (np.int32, np.int64):
        order = order.astype(np.int64)
    n = len(order)
    parts = max(1, min(int(threads), n))
    bounds = [p * n // parts for p in range(parts + 1)]
    args = (float(x_max), float(alpha), float(lr), bool(tool))

    def part(p: int) -> float:
        lo, hi = bounds[p], bounds[p + 1]
        return train_entries(word, context, gword, gcontext, rows, cols, vals, order, lo, hi, *args)

    if parts == 1:
        return float(part(0))
    return float(sum(thread_pool("glove", parts).map(part, range(parts))))


def check_ids(rows: np.ndarray, cols: np.ndarray, vocab_size: int) -> None:
    """Refuses ids outside 0..V−1 before the kernel, which does not check, could write there."""
    for name, ids in (("rows", rows), ("cols", cols)):
        if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
            raise ValueError(
                f"{name}: ids must be in 0..{vocab_size - 1} (the vocabulary), got "
                f"{int(ids.min())}..{int(ids.max())}"
            )
