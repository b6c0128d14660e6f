"""Tests for the output layers over a vocabulary (nlpzoo.models.outputs): the Huffman tree, the
full, hierarchical and adaptive softmax, each exact and normalised over the whole vocabulary."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from nlpzoo.models.outputs import (
    AdaptiveSoftmax,
    FullSoftmax,
    HierarchicalSoftmax,
    huffman_tree,
    make_output,
)

pytestmark = pytest.mark.usefixtures("one_thread")


def random_counts(seed: int, V: int = 50) -> np.ndarray:
    """Zipf-like counts with ties and a few zeros (the specials of a real vocabulary)."""
    rng = np.random.default_rng(seed)
    counts = rng.zipf(1.5, size=V).clip(max=10_000)
    counts[rng.choice(V, size=5, replace=False)] = 0
    return counts


def code_strings(tree) -> list[str]:
    return ["".join(map(str, tree.codes[w, : tree.lengths[w]])) for w in range(len(tree.lengths))]


# ---------------------------------------------------------------------------------- Huffman tree


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_huffman_codes_are_prefix_free(seed):
    codes = code_strings(huffman_tree(random_counts(seed)))
    assert len(set(codes)) == len(codes)
    for i, c in enumerate(codes):
        assert c  # V >= 2: every word has a non-empty code
        for j, other in enumerate(codes):
            assert i == j or not other.startswith(c), (c, other)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_huffman_kraft_equality_and_structure(seed):
    counts = random_counts(seed)
    tree = huffman_tree(counts)
    V = len(counts)
    # a full binary tree: Σ 2^−len = 1 exactly
    assert sum(Fraction(1, 2 ** int(n)) for n in tree.lengths) == 1
    assert tree.num_inner == V - 1
    assert tree.points.shape == tree.codes.shape == (V, tree.lengths.max())
    # every path starts at the root (the last inner node) and uses inner-node ids 0..V-2
    assert (tree.points[:, 0] == V - 2).all()
    used = np.concatenate([tree.points[w, : tree.lengths[w]] for w in range(V)])
    assert set(used.tolist()) == set(range(V - 1))
    assert set(tree.codes.ravel().tolist()) <= {0, 1}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_huffman_frequent_words_get_shorter_codes(seed):
    counts = random_counts(seed)
    tree = huffman_tree(counts)
    assert tree.lengths[np.argmax(counts)] == tree.lengths.min()
    # an optimal code never gives a more frequent word a longer code
    for i in range(len(counts)):
        for j in range(len(counts)):
            if counts[i] > counts[j]:
                assert tree.lengths[i] <= tree.lengths[j], (i, j)


def test_huffman_cost_on_a_textbook_example():
    """CLRS §16.3: frequencies 45 13 12 16 9 5 (a..f) give code lengths 1 3 3 3 4 4, cost 224."""
    counts = [45, 13, 12, 16, 9, 5]
    tree = huffman_tree(counts)
    assert tree.lengths.tolist() == [1, 3, 3, 3, 4, 4]
    assert int(np.dot(counts, tree.lengths)) == 224  # the optimal weighted path length
    assert tree.mean_length(counts) == pytest.approx(224 / 100)
    assert tree.mean_length([0] * 6) == pytest.approx(18 / 6)  # no counts: uniform over words


def test_huffman_is_deterministic():
    counts = random_counts(4)
    a, b = huffman_tree(counts), huffman_tree(list(counts))
    for key in ("points", "codes", "lengths"):
        assert np.array_equal(getattr(a, key), getattr(b, key))
    # all counts equal (or zero): ties everywhere, still a balanced, reproducible tree
    flat = huffman_tree([0] * 8)
    assert flat.lengths.tolist() == [3] * 8
    assert np.array_equal(flat.codes, huffman_tree([0] * 8).codes)


def test_huffman_refuses_bad_counts():
    with pytest.raises(ValueError, match=">= 2"):
        huffman_tree([5])
    with pytest.raises(ValueError, match=">= 0"):
        huffman_tree([3, -1, 2])


# A 5-word tree derived by hand. counts = [10, 6, 3, 2, 1]; leaves are nodes 0..4, inner nodes
# 5, 6, 7, 8 (= inner ids 0, 1, 2, 3) in order of creation; the lighter of a pair gets bit 0 and
# ties go to the smaller node id:
#   merge (1: word 4) + (2: word 3)        → node 5 (inner 0), weight 3; word 4 bit 0, word 3 bit 1
#   merge (3: word 2) + (3: node 5)        → node 6 (inner 1), weight 6; tie 3 = 3: word 2 first
#   merge (6: word 1) + (6: node 6)        → node 7 (inner 2), weight 12; tie: word 1 first
#   merge (10: word 0) + (12: node 7)      → node 8 (inner 3, the root), weight 22
# Root → leaf:  word 0: [3] bits [0]          word 1: [3, 2] bits [1, 0]
#               word 2: [3, 2, 1] [1, 1, 0]   word 3: [3, 2, 1, 0] [1, 1, 1, 1]
#               word 4: [3, 2, 1, 0] [1, 1, 1, 0]
HAND_COUNTS = [10, 6, 3, 2, 1]
HAND_PATHS = {0: ([3], [0]), 1: ([3, 2], [1, 0]), 2: ([3, 2, 1], [1, 1, 0]),
              3: ([3, 2, 1, 0], [1, 1, 1, 1]), 4: ([3, 2, 1, 0], [1, 1, 1, 0])}  # fmt: skip


def test_huffman_hand_built_tree():
    tree = huffman_tree(HAND_COUNTS)
    for w, (points, codes) in HAND_PATHS.items():
        n = len(points)
        assert tree.lengths[w] == n
        assert tree.points[w, :n].tolist() == points
        assert tree.codes[w, :n].tolist() == codes


# ---------------------------------------------------------------------------------- hierarchical


def logsig(x: float) -> float:
    return -math.log1p(math.exp(-x))


def test_hierarchical_log_prob_by_hand_on_the_5_word_tree():
    torch.manual_seed(0)
    layer = HierarchicalSoftmax(3, HAND_COUNTS).double()
    h = torch.randn(2, 3, dtype=torch.float64)
    v, b = layer.weight.detach(), layer.bias.detach()
    with torch.no_grad():
        got = layer.log_prob_all(h)
        for w, (points, codes) in HAND_PATHS.items():
            for i in range(2):
                # σ(s) for bit 0, σ(−s) for bit 1, s = v_n·h + b_n at each node of the path
                expected = sum(
                    logsig((1 - 2 * c) * float(v[n] @ h[i] + b[n]))
                    for n, c in zip(points, codes, strict=True)
                )
                assert float(got[i, w]) == pytest.approx(expected, abs=1e-12)
                one = layer.log_prob(h[i : i + 1], torch.tensor([w]))
                assert float(one[0]) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_hierarchical_sums_to_one_over_the_vocabulary(seed):
    torch.manual_seed(seed)
    counts = random_counts(seed, V=50)
    layer = HierarchicalSoftmax(16, counts).double()
    with torch.no_grad():
        layer.weight.mul_(3.0)  # sharp distributions, far from uniform
        h = torch.randn(7, 16, dtype=torch.float64)
        lp = layer.log_prob_all(h)  # (7, 50)
        targets = torch.arange(50)[torch.randperm(50)][:7]
        gathered = layer.log_prob(h, targets)
    assert lp.shape == (7, 50)
    torch.testing.assert_close(
        lp.exp().sum(1), torch.ones(7, dtype=torch.float64), atol=1e-5, rtol=0
    )
    assert lp.exp().max() > 0.2  # not a uniform distribution in disguise
    torch.testing.assert_close(gathered, lp[torch.arange(7), targets], atol=1e-12, rtol=0)


def test_hierarchical_state_dict_carries_the_tree():
    torch.manual_seed(1)
    a = HierarchicalSoftmax(4, HAND_COUNTS)
    b = HierarchicalSoftmax(4, HAND_COUNTS[::-1])  # another tree of the same depth
    assert not torch.equal(a.points, b.points)
    assert {"points", "codes", "lengths", "weight", "bias"} <= set(a.state_dict())
    b.load_state_dict(a.state_dict())
    h = torch.randn(3, 4)
    with torch.no_grad():
        torch.testing.assert_close(b.log_prob_all(h), a.log_prob_all(h))


def test_hierarchical_gradients_reach_only_the_path():
    torch.manual_seed(2)
    layer = HierarchicalSoftmax(3, HAND_COUNTS)
    layer.log_prob(torch.randn(1, 3), torch.tensor([1])).sum().backward()
    touched = (layer.weight.grad.abs().sum(1) > 0).nonzero().squeeze(1).tolist()
    assert touched == [2, 3]  # word 1's path: the root (3) and inner node 2


def test_hierarchical_cost_is_the_mean_path_length():
    layer = HierarchicalSoftmax(8, HAND_COUNTS)
    # lengths 1 2 3 4 4 weighted by 10 6 3 2 1: 43/22 nodes per token, 8 multiply-adds each
    assert layer.num_ops_per_token() == pytest.approx(8 * 43 / 22)
    assert FullSoftmax(8, 5).num_ops_per_token() == 8 * 5


# ---------------------------------------------------------------------------------- adaptive


@pytest.mark.parametrize("cutoffs", [[], [5], [5, 20], [1, 2, 49]])
def test_adaptive_sums_to_one_and_gathers(cutoffs):
    torch.manual_seed(len(cutoffs))
    layer = AdaptiveSoftmax(16, 50, cutoffs).double()
    h = 2 * torch.randn(9, 16, dtype=torch.float64)
    targets = torch.tensor([0, 4, 5, 6, 19, 20, 21, 48, 49])  # every cluster's edges
    with torch.no_grad():
        lp = layer.log_prob_all(h)
        got = layer.log_prob(h, targets)
    torch.testing.assert_close(
        lp.exp().sum(1), torch.ones(9, dtype=torch.float64), atol=1e-9, rtol=0
    )
    torch.testing.assert_close(got, lp[torch.arange(9), targets], atol=1e-12, rtol=0)


def test_adaptive_log_prob_by_hand():
    """A word of the second tail: log p_head(tail 2) + log softmax(B₂ (P₂ h) + c₂)[w − 20]."""
    torch.manual_seed(3)
    layer = AdaptiveSoftmax(32, 50, [5, 20], div_value=4.0).double()
    assert [t[0].out_features for t in layer.tails] == [8, 2]  # 32/4, 32/16
    assert layer.head.out_features == 5 + 2
    h = torch.randn(1, 32, dtype=torch.float64)
    with torch.no_grad():
        head = layer.head.weight @ h[0] + layer.head.bias  # (7,)
        proj, out = layer.tails[1]
        tail = out.weight @ (proj.weight @ h[0]) + out.bias  # (30,)
        expected = torch.log_softmax(head, 0)[6] + torch.log_softmax(tail, 0)[33 - 20]
        assert float(layer.log_prob(h, torch.tensor([33]))[0]) == pytest.approx(float(expected))
        # a shortlist word needs the head alone
        expected = torch.log_softmax(head, 0)[3]
        assert float(layer.log_prob(h, torch.tensor([3]))[0]) == pytest.approx(float(expected))


def test_adaptive_without_cutoffs_is_a_full_softmax():
    torch.manual_seed(4)
    full = FullSoftmax(6, 30).double()
    adaptive = AdaptiveSoftmax(6, 30, []).double()
    assert len(adaptive.tails) == 0
    with torch.no_grad():
        adaptive.head.weight.copy_(full.weight)
        adaptive.head.bias.copy_(full.bias)
    h = torch.randn(5, 6, dtype=torch.float64)
    t = torch.tensor([0, 29, 7, 7, 13])
    with torch.no_grad():
        torch.testing.assert_close(adaptive.log_prob_all(h), full.log_prob_all(h))
        torch.testing.assert_close(adaptive.log_prob(h, t), full.log_prob(h, t))
        expected = F.log_softmax(h @ full.weight.T + full.bias, dim=1)[torch.arange(5), t]
        torch.testing.assert_close(full.log_prob(h, t), expected)


@pytest.mark.parametrize("cutoffs", [[5, 5], [0, 10], [10, 50], [30, 10], [60]])
def test_adaptive_refuses_bad_cutoffs(cutoffs):
    with pytest.raises(ValueError, match="cutoffs"):
        AdaptiveSoftmax(8, 50, cutoffs)


def test_adaptive_cost():
    d, V = 16, 50
    counts = np.zeros(V)
    counts[:5], counts[5:20], counts[20:] = 10, 2, 1  # shares 50/110, 30/110, 30/110
    layer = AdaptiveSoftmax(d, V, [5, 20], counts=counts)
    # head d·(5 + 2); tail 1: d→4→15; tail 2: d→1→30, each paid by its share of tokens
    expected = d * 7 + (30 / 110) * (d * 4 + 4 * 15) + (30 / 110) * (d * 1 + 1 * 30)
    assert layer.num_ops_per_token() == pytest.approx(expected)
    # without counts every word counts the same: tails hold 15/50 and 30/50 of the tokens
    uniform = d * 7 + 0.3 * (d * 4 + 4 * 15) + 0.6 * (d * 1 + 1 * 30)
    assert AdaptiveSoftmax(d, V, [5, 20]).num_ops_per_token() == pytest.approx(uniform)


# ---------------------------------------------------------------------------------- factory


def test_make_output():
    counts = random_counts(5, V=20)
    assert type(make_output("softmax", 4, 20, None, [])) is FullSoftmax
    hier = make_output("hierarchical", 4, 20, counts, [])
    assert isinstance(hier, HierarchicalSoftmax) and hier.weight.shape == (19, 4)
    adaptive = make_output("adaptive", 4, 20, counts, [3, 9], div_value=2.0)
    assert isinstance(adaptive, AdaptiveSoftmax)
    assert [t[0].out_features for t in adaptive.tails] == [2, 1]
    with pytest.raises(ValueError, match="counts"):
        make_output("hierarchical", 4, 20, None, [])
    with pytest.raises(ValueError, match="21 entries"):
        make_output("hierarchical", 4, 20, [1] * 21, [])
    with pytest.raises(ValueError, match="softmax, hierarchical, adaptive"):
        make_output("sampled", 4, 20, counts, [])
