"""GloVe word co-occurrence counts (Pennington et al. 2014), streamed in bounded memory.

Counting
--------
Sentences are tokenized on spaces and mapped to ids. Tokens that are not in the vocabulary, or
that map to a special id (< 4), are dropped from the stream *before* windowing, as the GloVe
reference tool does with out-of-vocabulary words; so two in-vocabulary words separated only by
dropped tokens become neighbours. With `keep_unk=True` unknown words instead become `<unk>`
(id 0) and are counted like any other word.

Every pair of stream positions p < q with distance d = q - p <= window adds the weight
w(d) = 1/d (or 1 without distance weighting) to both X[a, b] and X[b, a], where a, b are the
ids at p and q. The matrix is therefore symmetric. A word next to itself (a == b) adds the two
ordered pairs (a, a) and (a, a): the diagonal gets 2 * w(d) per occurrence.

Pairs are formed with numpy, one offset at a time, over a batch of sentences concatenated into
one id array (`sent` holds each token's sentence number)::

    ids   :  a  b  c | d  e         (| = sentence boundary, sent = 0 0 0 1 1)

    d = 1 :  left  = ids[:-1]  = a  b  c  d
             right = ids[1:]   = b  c  d  e
             same sentence?      y  y  n  y   ->  (a,b) (b,c) (d,e)      weight 1
    d = 2 :  left  = ids[:-2]  = a  b  c
             right = ids[2:]   = c  d  e
             same sentence?      y  n  n      ->  (a,c)                  weight 1/2

Each kept (left, right) is stored once, as the unordered pair (lo, hi) = (min, max) keyed as
`lo * V + hi` (int64); a diagonal pair (a, a) is stored twice, giving its 2 * w(d). Only when a
chunk has been summed is every off-diagonal (lo, hi) entry mirrored to (hi, lo). X[a, b] and
X[b, a] are thus the very same float64 sum and the output is exactly symmetric (summing the
two ordered pairs separately would differ in the last bit, from a different summation order).
Without `sentence_bounded` the whole corpus is one stream and the last `window` ids of a batch
are carried into the next one (only pairs whose right end is new are formed).

Bounded memory
--------------
Unordered pairs go into a fixed-size buffer (`memory_mb` sets its size, including the scratch
needed to sort it). When full, the buffer is aggregated (sort by key, sum weights in float64),
mirrored, and spilled as a run sorted by (row, col) into a scratch directory. At the end the
runs are k-way merged block by block (runs are memory-mapped, only one block per run is in RAM)
and the merged triples are streamed into the output `.npz`. If everything fits in one buffer
nothing is spilled. The scratch directory is removed in every case, also when counting fails.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

import numpy as np

from nlpzoo.errors import DataError
from nlpzoo.io import atomic_open
from nlpzoo.params_data import CooccurConfig

N_SPECIALS = 4  # ids 0..3 are <unk> <s> </s> <pad> (nlpzoo.data.vocab)
UNK = 0

_BATCH_LINES = 10_000
_BATCH_TOKENS = 1_000_000
_COPY_BLOCK = 1 << 20  # elements per block when streaming arrays into the .npz
_MAX_FANIN = 64  # runs merged at once
_FIELDS = {"rows": np.int32, "cols": np.int32, "vals": np.float64}


def _aggregate(keys: np.ndarray, vals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort by key and sum the values of equal keys (float64)."""
    if keys.size == 0:
        return keys.astype(np.int64), vals.astype(np.float64)
    order = np.argsort(keys, kind="stable")  # (n,)
    sk = keys[order]  # (n,) sorted keys
    sv = vals[order]  # (n,)
    del order
    starts = np.flatnonzero(np.concatenate(([True], sk[1:] != sk[:-1])))  # (u,)
    return sk[starts], np.add.reduceat(sv, starts).astype(np.float64, copy=False)  # (u,) (u,)


def _mirror(keys: np.ndarray, vals: np.ndarray, V: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique keys lo * V + hi (lo <= hi) -> both (lo, hi) and (hi, lo), sorted."""
    rows = keys // V  # (u,)
    cols = keys - rows * V  # (u,)
    off = rows != cols  # (u,) off-diagonal entries get a mirror image
    tk = cols[off] * V + rows[off]  # (t,) keys of (hi, lo)
    del rows, cols
    tv = vals[off]  # (t,)
    order = np.argsort(tk, kind="stable")  # (t,)
    tk, tv = tk[order], tv[order]
    del order
    # Two sorted runs: a stable sort (timsort) of their concatenation is a linear merge.
    all_k = np.concatenate((keys, tk))  # (u + t,)
    all_v = np.concatenate((vals, tv))  # (u + t,)
    del tk, tv
    order = np.argsort(all_k, kind="stable")  # (u + t,)
    return all_k[order], all_v[order]


class _PairBuffer:
    """Fixed-capacity buffer of (pair key, weight); calls `flush` with its contents when full."""

    def __init__(self, capacity: int, flush: Callable[[np.ndarray, np.ndarray], None]) -> None:
        self.keys = np.empty(capacity, dtype=np.int64)  # (capacity,)
        self.vals = np.empty(capacity, dtype=np.float64)  # (capacity,)
        self.n = 0
        self.flush_fn = flush

    def add(self, keys: np.ndarray, weight: float) -> None:
        cap = self.keys.size
        i = 0
        while i < keys.size:
            m = min(keys.size - i, cap - self.n)
            self.keys[self.n : self.n + m] = keys[i : i + m]
            self.vals[self.n : self.n + m] = weight
            self.n += m
            i += m
            if self.n == cap:
                self.flush()

    def flush(self) -> None:
        if self.n:
            self.flush_fn(self.keys[: self.n], self.vals[: self.n])
            self.n = 0


def _batches(lines: Iterable[str], batch_lines: int) -> Iterator[list[str]]:
    it = iter(lines)
    while True:
        batch: list[str] = []
        tokens = 0
        for line in it:
            batch.append(line)
            tokens += line.count(" ") + 1
            if len(batch) >= batch_lines or tokens >= _BATCH_TOKENS:
                break
        if not batch:
            return
        yield batch


def _encode(
    batch: list[str], lookup: dict[str, int], default: int
) -> tuple[np.ndarray, np.ndarray]:
    """Ids of the kept tokens of a batch and their sentence numbers within the batch."""
    get = lookup.get
    flat: list[int] = []
    lens: list[int] = []
    for line in batch:
        toks = line.split()
        flat.extend([get(w, default) for w in toks])
        lens.append(len(toks))
    ids = np.asarray(flat, dtype=np.int64)  # (n_tok,) -1 = dropped
    sent = np.repeat(np.arange(len(lens), dtype=np.int64), lens)  # (n_tok,)
    keep = ids >= 0  # (n_tok,)
    return ids[keep], sent[keep]


def _make_lookup(word_to_id: Mapping[str, int], vocab_size: int, keep_unk: bool) -> dict[str, int]:
    """word -> id for counted words, -1 for words to drop (specials; <unk> unless keep_unk)."""
    lookup: dict[str, int] = {}
    for w, i in word_to_id.items():
        i = int(i)
        if not 0 <= i < vocab_size:
            raise DataError(f"cooccur: word {w!r} has id {i}, outside 0..{vocab_size - 1}")
        lookup[w] = i if i >= N_SPECIALS or (keep_unk and i == UNK) else -1
    return lookup


def count_cooccurrences(
    lines: Iterable[str],
    word_to_id: Mapping[str, int],
    vocab_size: int,
    out_path: Path,
    config: CooccurConfig,
    scratch_dir: Path | None = None,
    *,
    _max_pairs: int | None = None,
    _batch_lines: int = _BATCH_LINES,
) -> dict:
    """Count co-occurrences of `lines` into `out_path` (.npz, written atomically).

    Returns JSON-ready stats: nonzeros, total_weight, tokens (ids in the counted stream),
    pairs (ordered pairs before aggregation), chunks (buffers aggregated), vocab_size, window.
    `_max_pairs` / `_batch_lines` override the buffer size and the sentences per batch (tests).
    """
    if isinstance(lines, (str, bytes)):
        raise TypeError(
            "count_cooccurrences: `lines` must be an iterable of sentences, not a string"
        )
    vocab_size = int(vocab_size)
    if not 1 <= vocab_size < 2**31:
        raise DataError(f"cooccur: vocab_size must be in 1..2**31-1, got {vocab_size}")
    out_path = Path(out_path)
    max_pairs = config.max_pairs() if _max_pairs is None else max(1, int(_max_pairs))
    lookup = _make_lookup(word_to_id, vocab_size, config.keep_unk)
    default = UNK if config.keep_unk else -1
    V = vocab_size
    W = config.window

    parent = Path(scratch_dir) if scratch_dir is not None else out_path.parent
    parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".cooccur.", suffix=".tmp", dir=parent))
    try:
        runs: list[tuple[Path, Path]] = []
        stats = {"tokens": 0, "pairs": 0, "chunks": 0}

        def spill(keys: np.ndarray, vals: np.ndarray) -> None:
            uk, uv = _aggregate(keys, vals)  # (u,) (u,) sorted unique (lo, hi) keys, sums
            stats["chunks"] += 1
            runs.append(_spill(scratch, f"run{len(runs)}", *_mirror(uk, uv, V)))

        buf = _PairBuffer(max_pairs, spill)
        carry = np.empty(0, dtype=np.int64)  # last W ids of the stream (not sentence_bounded)
        for batch in _batches(lines, _batch_lines):
            ids, sent = _encode(batch, lookup, default)  # (n_new,) (n_new,)
            stats["tokens"] += int(ids.size)
            c = 0
            if not config.sentence_bounded:
                c = carry.size
                ids = np.concatenate((carry, ids))  # (n,) carried context, then new ids
                carry = ids[-W:].copy()
            n = ids.size
            for d in range(1, W + 1):
                start = max(c - d, 0)  # pairs need their right end among the new ids
                if start >= n - d:
                    continue
                left = ids[start : n - d]  # (m,)
                right = ids[start + d : n]  # (m,)
                if config.sentence_bounded:
                    same = sent[: n - d] == sent[d:]  # (m,) both ends in the same sentence
                    left, right = left[same], right[same]
                weight = 1.0 / d if config.distance_weighting else 1.0
                lo = np.minimum(left, right)  # (m,)
                hi = np.maximum(left, right)  # (m,)
                keys = lo * V + hi  # (m,) keys of the unordered pairs
                buf.add(keys, weight)
                buf.add(keys[lo == hi], weight)  # (a, a) counts as two ordered pairs
                stats["pairs"] += 2 * int(left.size)
        if runs:
            buf.flush()  # spill the rest, then merge all runs
            del buf
            nnz, total = _merge_runs(runs, scratch, V, max_pairs)
            out = {x: _file_blocks(scratch / f"out.{x}", dt, nnz) for x, dt in _FIELDS.items()}
        else:  # everything fit in one buffer: aggregate in memory, no spill
            nnz_in = buf.n
            keys, vals = _aggregate(buf.keys[:nnz_in], buf.vals[:nnz_in])  # (u,) (u,)
            keys, vals = _mirror(keys, vals, V)  # (nnz,) (nnz,)
            del buf
            stats["chunks"] += int(nnz_in > 0)
            nnz, total = int(keys.size), float(vals.sum())
            out = {
                "rows": iter([(keys // V).astype(np.int32)]),
                "cols": iter([(keys % V).astype(np.int32)]),
                "vals": iter([vals]),
            }
            del keys, vals
        _write_npz(out_path, V, nnz, out)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {
        "nonzeros": nnz,
        "total_weight": total,
        "tokens": stats["tokens"],
        "pairs": stats["pairs"],
        "chunks": stats["chunks"],
        "vocab_size": V,
        "window": W,
    }


def _spill(scratch: Path, name: str, keys: np.ndarray, vals: np.ndarray) -> tuple[Path, Path]:
    """Write a sorted run as two raw files (int64 keys, float64 values)."""
    kp, vp = scratch / f"{name}.keys", scratch / f"{name}.vals"
    keys.astype(np.int64, copy=False).tofile(kp)
    vals.astype(np.float64, copy=False).tofile(vp)
    return kp, vp


def _merge(runs: list[tuple[Path, Path]], block: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """K-way merge of sorted runs: yields (keys, summed values) blocks in increasing key order.

    Each round reads the next `block` keys of every run and takes from each the keys <= T, where
    T is the smallest last key among blocks that do not end their run: no key <= T can appear
    later, so the round's aggregated output is final. Blocks are read from the run files with
    plain reads (a memory map would keep every page it touched resident, so the process would
    grow with the corpus); only one block per run is in RAM. Equal keys are summed in run order,
    the same order for (a, b) and (b, a).
    """
    with contextlib.ExitStack() as stack:
        kf = [stack.enter_context(open(kp, "rb")) for kp, _ in runs]
        vf = [stack.enter_context(open(vp, "rb")) for _, vp in runs]
        size = [kp.stat().st_size // 8 for kp, _ in runs]  # elements per run
        pos = [0] * len(runs)

        def read(f, dtype: type, i: int, count: int) -> np.ndarray:
            f.seek(pos[i] * 8)
            return np.fromfile(f, dtype=dtype, count=count)

        active = [i for i in range(len(runs)) if size[i]]
        while active:
            blocks = {i: read(kf[i], np.int64, i, block) for i in active}
            ends = [blk[-1] for i, blk in blocks.items() if pos[i] + blk.size < size[i]]
            bound = min(ends) if ends else None
            pk, pv = [], []
            for i, blk in blocks.items():
                take = blk.size if bound is None else int(np.searchsorted(blk, bound, "right"))
                pk.append(blk[:take])  # (take,)
                pv.append(read(vf[i], np.float64, i, take))  # (take,)
                pos[i] += take
            active = [i for i in active if pos[i] < size[i]]
            yield _aggregate(np.concatenate(pk), np.concatenate(pv))  # (u,) (u,)


def _merge_runs(
    runs: list[tuple[Path, Path]], scratch: Path, V: int, max_pairs: int
) -> tuple[int, float]:
    """Merge all runs into raw out.rows/out.cols/out.vals files; returns (nnz, total weight).

    At most `_MAX_FANIN` runs are merged at once (each open memory map holds a file descriptor);
    with more, groups of runs are first merged into longer runs, level by level.
    """
    level = 0
    while len(runs) > _MAX_FANIN:
        merged = []
        for g in range(0, len(runs), _MAX_FANIN):
            group = runs[g : g + _MAX_FANIN]
            if len(group) == 1:
                merged.append(group[0])
                continue
            kp, vp = scratch / f"merge{level}.{g}.keys", scratch / f"merge{level}.{g}.vals"
            with open(kp, "wb") as fk, open(vp, "wb") as fv:
                for uk, uv in _merge(group, max(1, max_pairs // (2 * len(group)))):
                    uk.tofile(fk)
                    uv.tofile(fv)
            for paths in group:
                for path in paths:
                    path.unlink()
            merged.append((kp, vp))
        runs = merged
        level += 1
    nnz, total = 0, 0.0
    with (
        open(scratch / "out.rows", "wb") as fr,
        open(scratch / "out.cols", "wb") as fc,
        open(scratch / "out.vals", "wb") as fv,
    ):
        for uk, uv in _merge(runs, max(1, max_pairs // (2 * len(runs)))):
            (uk // V).astype(np.int32).tofile(fr)
            (uk % V).astype(np.int32).tofile(fc)
            uv.tofile(fv)
            nnz += int(uk.size)
            total += float(uv.sum())
    return nnz, total


def _file_blocks(path: Path, dtype: type, n: int) -> Iterator[np.ndarray]:
    with open(path, "rb") as f:
        done = 0
        while done < n:
            m = min(_COPY_BLOCK, n - done)
            yield np.fromfile(f, dtype=dtype, count=m)
            done += m


def _write_npz(
    out_path: Path, vocab_size: int, nnz: int, arrays: dict[str, Iterator[np.ndarray]]
) -> None:
    """Stream 1-D arrays of length `nnz` (given as blocks) and `vocab_size` into an .npz."""
    fmt = np.lib.format
    with atomic_open(out_path, "wb") as f, zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as zf:
        for name, blocks in arrays.items():
            with zf.open(f"{name}.npy", "w", force_zip64=True) as m:
                dtype = _FIELDS[name]
                header = fmt.header_data_from_array_1_0(np.empty(0, dtype=dtype))
                header["shape"] = (nnz,)
                fmt.write_array_header_1_0(m, header)
                written = 0
                for blk in blocks:
                    m.write(np.ascontiguousarray(blk, dtype=dtype).tobytes())
                    written += blk.size
                if written != nnz:
                    raise DataError(f"cooccur: wrote {written} {name} values, expected {nnz}")
        with zf.open("vocab_size.npy", "w") as m:
            fmt.write_array(m, np.asarray(vocab_size, dtype=np.int64))


def load_cooccurrences(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(rows int32, cols int32, vals float64, vocab_size) from a `count_cooccurrences` file."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: co-occurrence file not found (run the cooccur stage first)")
    try:
        with np.load(path, allow_pickle=False) as z:
            missing = {"rows", "cols", "vals", "vocab_size"} - set(z.files)
            if missing:
                raise DataError(f"{path}: not a co-occurrence file (missing {sorted(missing)})")
            rows, cols, vals = z["rows"], z["cols"], z["vals"]
            vocab_size = int(z["vocab_size"])
    except (OSError, ValueError, zipfile.BadZipFile) as e:
        raise DataError(f"{path}: unreadable co-occurrence file ({e})") from e
    if not rows.shape == cols.shape == vals.shape or rows.ndim != 1:
        raise DataError(f"{path}: rows/cols/vals have different shapes")
    return rows, cols, vals, vocab_size


__all__ = ["CooccurConfig", "count_cooccurrences", "load_cooccurrences"]
