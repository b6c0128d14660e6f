"""Output layers over a vocabulary: hidden vectors h (N, d) → exact natural-log probabilities.

Shared by the language-model families (and word2vec's hierarchical softmax). Every layer is exact
and normalised over the whole vocabulary, so perplexities of different layers compare fairly:

    FullSoftmax          log p(w|h) = (U h + b)_w − log Σ_j exp (U h + b)_j
                         cost d·V per token
    HierarchicalSoftmax  log p(w|h) = Σ_{n on path(w)} log σ((1 − 2 c_n)(v_n·h + b_n))
                         over a binary Huffman tree (Morin & Bengio 2005; Mikolov et al. 2013),
                         c_n the branch bit taken at inner node n; cost d·(mean path length)
    AdaptiveSoftmax      log p(w|h) = log p_head(cluster(w)|h) + log p_tail(w|cluster, h)
                         (Grave et al. 2017), frequent words in the head's shortlist; cost
                         d·(shortlist + tails) + the tails' costs weighted by their frequency

Common interface: `log_prob(h, targets) -> (N,)`, `log_prob_all(h) -> (N, V)` (the full
distribution; memory N·V, for tests and small checks) and `num_ops_per_token()` (multiply-adds of
one `log_prob`, in expectation over the training counts where the cost depends on the word).

Symbols: N rows (batch), d input size, V vocabulary size, L the longest Huffman code.
Ids are frequency-sorted (the vocabulary orders words by training count), so adaptive clusters are
contiguous id ranges.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from nlpzoo.families.common import KINDS

# ---------------------------------------------------------------------------------- Huffman tree


@dataclass
class HuffmanTree:
    """Binary Huffman tree over V words: V leaves, V − 1 inner nodes numbered 0..V−2 (root V−2).

    Per word w (rows, padded with 0 beyond `lengths[w]`):
      points[w, :lengths[w]]  inner-node ids on the path root → leaf
      codes[w, :lengths[w]]   branch bit taken at each of those nodes (0 or 1)
    """

    points: np.ndarray  # (V, L) int64
    codes: np.ndarray  # (V, L) int64
    lengths: np.ndarray  # (V,) int64

    @property
    def num_inner(self) -> int:
        return len(self.lengths) - 1

    def mean_length(self, counts: Sequence[int] | np.ndarray) -> float:
        """Code length averaged over tokens (weighted by counts; uniform if every count is 0)."""
        w = np.asarray(counts, dtype=np.float64)
        if w.sum() <= 0:
            w = np.ones_like(w)
        return float((w * self.lengths).sum() / w.sum())


def huffman_tree(counts: Sequence[int] | np.ndarray) -> HuffmanTree:
    """Huffman tree of word frequencies, as in word2vec's CreateBinaryTree.

    The two lightest nodes are merged repeatedly; the lighter gets bit 0, the other bit 1. Ties
    are broken by node id (leaves are 0..V−1 by word id, inner nodes V, V+1, ... in order of
    creation), so the tree is a function of the counts alone. Zero counts are allowed.
    """
    c = np.asarray(counts)
    if c.ndim != 1 or c.size < 2:
        raise ValueError(f"a Huffman tree needs a 1-D array of >= 2 counts, got shape {c.shape}")
    if (c < 0).any():
        raise ValueError("counts must be >= 0")
    V = c.size
    parent = np.zeros(2 * V - 1, dtype=np.int64)  # node → its parent (node ids, root excluded)
    bit = np.zeros(2 * V - 1, dtype=np.int64)  # node → branch bit from its parent
    heap = [(int(n), i) for i, n in enumerate(c)]
    heapq.heapify(heap)
    for new in range(V, 2 * V - 1):
        n1, a = heapq.heappop(heap)  # the lightest → bit 0
        n2, b = heapq.heappop(heap)  # the second lightest → bit 1
        parent[a], parent[b] = new, new
        bit[b] = 1
        heapq.heappush(heap, (n1 + n2, new))
    root = 2 * V - 2
    # paths top-down: inner nodes were created bottom-up, so walk them in reverse creation order
    path: dict[int, tuple[list[int], list[int]]] = {root: ([], [])}
    for node in range(root - 1, -1, -1):
        pts, cds = path[int(parent[node])]
        path[node] = ([*pts, int(parent[node]) - V], [*cds, int(bit[node])])
    lengths = np.array([len(path[w][0]) for w in range(V)], dtype=np.int64)
    L = int(lengths.max())
    points = np.zeros((V, L), dtype=np.int64)
    codes = np.zeros((V, L), dtype=np.int64)
    for w in range(V):
        points[w, : lengths[w]] = path[w][0]
        codes[w, : lengths[w]] = path[w][1]
    return HuffmanTree(points=points, codes=codes, lengths=lengths)


# ---------------------------------------------------------------------------------- full softmax


class FullSoftmax(nn.Linear):
    """y = U h + b (calling the module gives these logits), then log_softmax over all V words."""

    def __init__(self, d: int, vocab_size: int) -> None:
        super().__init__(d, vocab_size)

    def log_prob_all(self, h: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(self(h), dim=-1)  # (N, V)

    def log_prob(self, h: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return self.log_prob_all(h).gather(1, targets[:, None]).squeeze(1)  # (N,)

    def num_ops_per_token(self) -> float:
        return float(self.in_features * self.out_features)  # d·V


# ---------------------------------------------------------------------------------- hierarchical


class HierarchicalSoftmax(nn.Module):
    """A path of sigmoids over a binary Huffman tree of the training counts.

    Inner node n has a vector v_n (`weight[n]`, d) and a bias b_n. Taking bit c at n has
    probability σ((1 − 2c)(v_n·h + b_n)): σ(s) for bit 0, σ(−s) = 1 − σ(s) for bit 1, so the two
    children of every node share its mass and the leaves sum to exactly one.
    """

    def __init__(self, d: int, counts: Sequence[int] | np.ndarray) -> None:
        super().__init__()
        tree = huffman_tree(counts)
        V = len(tree.lengths)
        self.in_features, self.vocab_size = d, V
        self.weight = nn.Parameter(torch.empty(V - 1, d))  # v_n, one per inner node
        self.bias = nn.Parameter(torch.empty(V - 1))  # b_n
        bound = 1.0 / math.sqrt(d)  # nn.Linear's default range
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)
        # the tree travels in the state_dict: a loaded model scores with the tree it trained on
        self.register_buffer("points", torch.from_numpy(tree.points))  # (V, L)
        self.register_buffer("codes", torch.from_numpy(tree.codes))  # (V, L)
        self.register_buffer("lengths", torch.from_numpy(tree.lengths))  # (V,)
        self.register_buffer("counts", torch.as_tensor(np.asarray(counts), dtype=torch.int64))

    def _path_log_prob(self, s: torch.Tensor, words: torch.Tensor) -> torch.Tensor:
        """Σ over the paths of `words` of log σ(±s); s holds the node scores gathered per path."""
        sign = 1 - 2 * self.codes[words].to(s.dtype)  # (..., L): +1 for bit 0, −1 for bit 1
        L = self.points.shape[1]
        mask = torch.arange(L, device=s.device) < self.lengths[words][..., None]  # (..., L)
        return (F.logsigmoid(sign * s) * mask).sum(-1)

    def log_prob(self, h: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        nodes = self.points[targets]  # (N, L)
        v = self.weight[nodes]  # (N, L, d): only the nodes on each target's path
        s = torch.bmm(v, h[:, :, None]).squeeze(2) + self.bias[nodes]  # (N, L) = v_n·h + b_n
        return self._path_log_prob(s, targets)  # (N,)

    def log_prob_all(self, h: torch.Tensor) -> torch.Tensor:
        s_all = h @ self.weight.T + self.bias  # (N, V−1): every inner node's score
        s = s_all[:, self.points]  # (N, V, L)
        words = torch.arange(self.vocab_size, device=h.device)
        return self._path_log_prob(s, words)  # (N, V)

    def num_ops_per_token(self) -> float:
        """d × the code length averaged over the training tokens (≈ d·log₂ of the perplexity)."""
        w = self.counts.double()
        if w.sum() <= 0:
            w = torch.ones_like(w)
        mean_len = float((w * self.lengths.double()).sum() / w.sum())
        return self.in_features * mean_len


# ---------------------------------------------------------------------------------- adaptive


def check_cutoffs(cutoffs: Sequence[int], vocab_size: int) -> None:
    """Cut-offs must be strictly increasing ids in (0, V)."""
    bounds = [0, *cutoffs, vocab_size]
    if any(not isinstance(c, int) or isinstance(c, bool) for c in cutoffs) or any(
        a >= b for a, b in itertools.pairwise(bounds)
    ):
        raise ValueError(
            f"cutoffs must be strictly increasing integers in (0, V={vocab_size}), got {cutoffs}"
        )


class AdaptiveSoftmax(nn.Module):
    """Adaptive softmax (Grave, Joulin, Cissé, Grangier & Jégou, ICML 2017), written out.

    Clusters are id ranges: the head's shortlist [0, c_0), tail i = [c_i, c_{i+1}) (c_k = V).
    The head is a softmax over the shortlist plus one token per tail; tail i projects h to
    d_i = d / div_value^(i+1) (at least 1) then takes a softmax over its words:

        log p(w|h) = log p_head(w|h)                                     w in the shortlist
        log p(w|h) = log p_head(tail i|h) + log p_tail_i(w|P_i h)        w in tail i

    With `cutoffs = []` there is no tail and the layer is exactly a full softmax.
    """

    def __init__(
        self,
        d: int,
        vocab_size: int,
        cutoffs: Sequence[int],
        div_value: float = 4.0,
        counts: Sequence[int] | np.ndarray | None = None,
    ) -> None:
        super().__init__()
        check_cutoffs(cutoffs, vocab_size)
        if div_value < 1:
            raise ValueError(f"div_value must be >= 1, got {div_value}")
        self.in_features, self.vocab_size = d, vocab_size
        self.bounds = [0, *cutoffs, vocab_size]  # cluster i covers [bounds[i], bounds[i+1])
        self.shortlist = self.bounds[1]
        k = len(cutoffs)  # number of tails
        self.head = nn.Linear(d, self.shortlist + k)  # shortlist words, then one token per tail
        self.tails = nn.ModuleList()
        for i in range(k):
            d_i = max(1, int(d // div_value ** (i + 1)))  # rarer words get smaller vectors
            size = self.bounds[i + 2] - self.bounds[i + 1]
            self.tails.append(nn.Sequential(nn.Linear(d, d_i, bias=False), nn.Linear(d_i, size)))
        self.counts = None if counts is None else np.asarray(counts, dtype=np.float64)

    def log_prob(self, h: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        c0 = self.shortlist
        head = torch.log_softmax(self.head(h), dim=-1)  # (N, c0 + k)
        tail_of = torch.zeros_like(targets)  # 0: shortlist; i + 1: tail i
        for i in range(len(self.tails)):
            tail_of += (targets >= self.bounds[i + 1]).long()
        head_index = torch.where(tail_of == 0, targets, c0 + tail_of - 1)  # (N,)
        lp = head.gather(1, head_index[:, None]).squeeze(1)  # (N,) log p_head
        for i, tail in enumerate(self.tails):
            rows = (tail_of == i + 1).nonzero().squeeze(1)  # (n_i,): only these rows pay tail i
            if rows.numel() == 0:
                continue
            tail_lp = torch.log_softmax(tail(h[rows]), dim=-1)  # (n_i, |tail i|)
            within = (targets[rows] - self.bounds[i + 1])[:, None]  # (n_i, 1)
            lp = lp.index_add(0, rows, tail_lp.gather(1, within).squeeze(1))
        return lp

    def log_prob_all(self, h: torch.Tensor) -> torch.Tensor:
        c0 = self.shortlist
        head = torch.log_softmax(self.head(h), dim=-1)  # (N, c0 + k)
        parts = [head[:, :c0]]
        for i, tail in enumerate(self.tails):
            parts.append(head[:, c0 + i, None] + torch.log_softmax(tail(h), dim=-1))
        return torch.cat(parts, dim=1)  # (N, V)

    def num_ops_per_token(self) -> float:
        """d·(c_0 + k) + Σ_i p_i·(d·d_i + d_i·|tail i|), p_i the share of training tokens in tail
        i (Grave et al.'s cost model); without counts, every word is taken as equally likely."""
        d = self.in_features
        if self.counts is not None and self.counts.sum() > 0:
            share = self.counts / self.counts.sum()
        else:
            share = np.full(self.vocab_size, 1.0 / self.vocab_size)
        ops = float(d * self.head.out_features)
        for i, tail in enumerate(self.tails):
            p_i = float(share[self.bounds[i + 1] : self.bounds[i + 2]].sum())
            proj, out = tail[0], tail[1]
            ops += p_i * (d * proj.out_features + proj.out_features * out.out_features)
        return ops


# ---------------------------------------------------------------------------------- factory


def make_output(
    kind: str,
    d: int,
    vocab_size: int,
    counts: Sequence[int] | np.ndarray | None = None,
    cutoffs: Sequence[int] = (),
    div_value: float = 4.0,
) -> FullSoftmax | HierarchicalSoftmax | AdaptiveSoftmax:
    """The output layer `kind` (softmax | hierarchical | adaptive) from d inputs to V words."""
    if kind == "softmax":
        return FullSoftmax(d, vocab_size)
    if kind == "hierarchical":
        if counts is None:
            raise ValueError(
                "output 'hierarchical' needs the training count of every word to build its "
                "Huffman tree: pass counts (e.g. Vocab.counts)"
            )
        if len(counts) != vocab_size:
            raise ValueError(f"counts has {len(counts)} entries for a vocabulary of {vocab_size}")
        return HierarchicalSoftmax(d, counts)
    if kind == "adaptive":
        return AdaptiveSoftmax(d, vocab_size, list(cutoffs), div_value, counts)
    raise ValueError(f"output must be one of {', '.join(KINDS)}, got {kind!r}")
