# %% [markdown]
# # 1. The n-gram language model: interpolated modified Kneser-Ney
#
# Before any neural network, a language model is a table of counts. This page fits the
# project's Kneser-Ney model to three tiny sentences and recomputes one probability by hand:
#
#     p(w | h) = max(c(hw) − D(c(hw)), 0) / Σ_w' c(hw')  +  γ(h) · p(w | h')
#     γ(h)     = (D1·N1(h•) + D2·N2(h•) + D3+·N3+(h•)) / Σ_w' c(hw')
#
# At the highest order c is the raw count; at every lower order it is the *continuation
# count*, the number of different words seen just before the n-gram. The recursion ends at the
# uniform distribution over the predicted vocabulary.

# %%
import numpy as np
from _common import REFERENCES, code, full_run, show

from nlpzoo.data.vocab import BOS, EOS, PAD, SPECIALS
from nlpzoo.families.ngram import NgramConfig
from nlpzoo.models.ngram import KneserNey

SENTENCES = ["a cat sat on a mat", "the cat sat on the mat", "a cat sat on the mat"]
WORDS = ["a", "cat", "mat", "on", "sat", "the"]
ID = {w: len(SPECIALS) + i for i, w in enumerate(WORDS)}  # ids 0..3 are the specials
V = len(SPECIALS) + len(WORDS)
# every sentence ends with </s>; the model predicts it like a word
stream = np.concatenate([np.r_[[ID[w] for w in s.split()], EOS] for s in SENTENCES])
print("stream:", stream.tolist())
lm = KneserNey(NgramConfig(order=3), V).fit(stream)
print("fitting:", code("src/nlpzoo/models/ngram.py", "KneserNey.fit"))
print("discounts:", code("src/nlpzoo/models/ngram.py", "estimate_discounts"))
for k, d in lm.discounts.items():
    print(f"  order {k}: D1, D2, D3+ = {np.round(d, 4).tolist()}")

# %% [markdown]
# Three sentences have too few counts of counts for Chen & Goodman's estimate
# Y = n1/(n1 + 2 n2), D1 = 1 − 2Y n2/n1, …: where a formula is undefined or leaves (0, c), the
# module falls back to 0.5, 1.0, 1.5 and logs a warning. Now the probability of "mat" after
# "on the", first from the module, then by hand from counts.

# %%
print("scoring:", code("src/nlpzoo/models/ngram.py", "KneserNey._probs"))
dist = lm.distribution([ID["on"], ID["the"]])
p_module = float(dist[ID["mat"]])
print(f"module: p(mat | on the) = {p_module:.6f};  Σ_w p(w | on the) = {dist.sum():.6f}")
print("BOS and PAD are never predicted:", dist[BOS], dist[PAD])


# %%
def grams(n):
    """Every n-gram of the BOS-padded sentences, as tuples (what the module counts)."""
    out = []
    for s in SENTENCES:
        ids = [BOS, BOS] + [ID[w] for w in s.split()] + [EOS]
        out += [tuple(ids[i - n + 1 : i + 1]) for i in range(2, len(ids))]
    return out


tri = grams(3)
bi_types = set(tri)  # a continuation count counts distinct left extensions
uni_left = set(grams(2))


def trigram_count(h, w):
    return sum(1 for g in tri if g == (*h, w))


def cont2(h1, w):  # N1+(• h1 w): distinct words before the bigram (h1, w)
    return len({g[0] for g in bi_types if g[1:] == (h1, w)})


def cont1(w):  # N1+(• w): distinct words before w
    return len({g[0] for g in uni_left if g[1] == w})


D = {k: lm.discounts[k] for k in (1, 2, 3)}
predicted = [i for i in range(V) if i not in (BOS, PAD)]


def disc(c, k):
    return 0.0 if c == 0 else D[k][min(c, 3) - 1]


def level(counts, k):
    """Discounted ratio for each word and γ, from the counts c(h·) of one history."""
    total = sum(counts.values())
    mass = sum(disc(c, k) for c in counts.values() if c > 0)
    return total, mass / total


# unigram level (continuation counts), interpolated with the uniform 1/|W|
c1 = {w: cont1(w) for w in predicted}
t1, g1 = level(c1, 1)
p1 = {w: max(c1[w] - disc(c1[w], 1), 0) / t1 + g1 / len(predicted) for w in predicted}
# bigram level, history "the"
c2 = {w: cont2(ID["the"], w) for w in predicted}
t2, g2 = level(c2, 2)
p2 = {w: max(c2[w] - disc(c2[w], 2), 0) / t2 + g2 * p1[w] for w in predicted}
# trigram level, history "on the" (raw counts)
c3 = {w: trigram_count((ID["on"], ID["the"]), w) for w in predicted}
t3, g3 = level(c3, 3)
m = ID["mat"]
p_hand = max(c3[m] - disc(c3[m], 3), 0) / t3 + g3 * p2[m]
print(f"c(on the mat) = {c3[m]} of {t3:g}; γ(on the) = {g3:.4f}")
print(f"N1+(• the mat) = {c2[m]} of {t2:g}; γ(the) = {g2:.4f}")
print(f"N1+(• mat) = {c1[m]} of {t1:g}; γ(ε) = {g1:.4f}; 1/|W| = 1/{len(predicted)}")
show("p(mat) unigram level", p1[m])
show("p(mat | the)", p2[m])
print(f"by hand: p(mat | on the) = {p_hand:.6f}  (module {p_module:.6f})")
assert abs(p_hand - p_module) < 1e-12

# %% [markdown]
# ## The full run
#
# The committed `ngram` run is the same class fitted on Brown (order 3); it is the yardstick of
# every language model in the report (their perplexity ratios are against it).

# %%
FULL = full_run("ngram", ["test_ppl", "valid_ppl", "params", "train_tokens", "fit_seconds"])
RESULTS = {
    "p_mat_on_the": p_module,
    "p_mat_on_the_by_hand": p_hand,
    "distribution_sum": float(dist.sum()),
    "discounts": {k: list(v) for k, v in lm.discounts.items()},
    "full_run": FULL,
}
__all__ = ["REFERENCES", "RESULTS"]
