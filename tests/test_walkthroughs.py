"""The walkthrough pages (walkthroughs/NN_name.py): each runs as a plain script, its numbers agree
with an independent numpy computation, and every file and function it names exists."""

from __future__ import annotations

import ast
import csv
import itertools
import json
import math
import re
import runpy
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES_DIR = ROOT / "walkthroughs"
PAGES = sorted(PAGES_DIR.glob("[0-9][0-9]_*.py"))
_CACHE: dict[str, dict] = {}


def run_page(stem: str) -> dict:
    """The page's module globals after running it (once per test session)."""
    if stem not in _CACHE:
        if str(PAGES_DIR) not in sys.path:
            sys.path.insert(0, str(PAGES_DIR))
        _CACHE[stem] = _run(stem)
    return _CACHE[stem]


def _run(stem: str) -> dict:
    """Run a page, then restore the torch settings it changes (default dtype, grad mode)."""
    import torch

    dtype, grad = torch.get_default_dtype(), torch.is_grad_enabled()
    try:
        return runpy.run_path(str(PAGES_DIR / f"{stem}.py"), run_name="__main__")
    finally:
        torch.set_default_dtype(dtype)
        torch.set_grad_enabled(grad)


def softmax(z, axis=-1):
    z = np.asarray(z, dtype=float)
    e = np.exp(z - z.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_sigmoid(x):
    return -np.log1p(np.exp(-x))


def close(a, b, tol=1e-9):
    np.testing.assert_allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), atol=tol)


def defined(path: Path, qualname: str) -> bool:
    scope = ast.parse(path.read_text(encoding="utf-8")).body
    for part in qualname.split("."):
        nodes = [
            n
            for n in scope
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and n.name == part
        ]
        if not nodes:
            return False
        scope = nodes[0].body
    return True


def test_there_is_a_page_per_step():
    names = [p.stem for p in PAGES]
    assert len(names) == 8, names
    for step in (
        "ngram",
        "nnlm",
        "word2vec",
        "rnn",
        "seq2seq",
        "attention",
        "transformer",
        "decoder_only",
    ):
        assert any(step in n for n in names), step


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_page_is_a_percent_script_naming_real_code(page):
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# %% [markdown]")
    assert text.count("# %%") >= 5
    refs = set(re.findall(r'code\(\s*"([^"]+)",\s*"([^"]+)"\s*\)', text))
    refs |= set(re.findall(r"(src/nlpzoo/[\w/]+\.py): ([A-Za-z_][\w.]*)", text))
    assert len(refs) >= 3, refs
    for path, qualname in refs:
        assert (ROOT / path).is_file(), path
        assert defined(ROOT / path, qualname), f"{path} defines no {qualname}"
    assert re.search(r"\bline \d+", text) is None  # code is named, never by line number


def test_the_reference_check_rejects_a_missing_name():
    nnlm = ROOT / "src/nlpzoo/models/nnlm.py"
    assert defined(nnlm, "NNLM.forward")
    assert not defined(nnlm, "NNLM.no_such_method")
    assert not defined(nnlm, "forward")  # a method is not a module-level function


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.stem)
def test_page_shows_its_committed_full_runs(page):
    results = run_page(page.stem)["RESULTS"]
    full = results["full_run"]
    runs = [full] if "curve" in full else list(full.values())
    for shown in runs:
        run = shown["run"]
        metrics = json.loads((ROOT / "metrics" / f"{run}.json").read_text())
        for name, value in shown.items():
            if name not in ("curve", "run"):
                assert value == metrics.get(name), (run, name)
        with (ROOT / "plots" / f"{run}.csv").open() as f:
            rows = list(csv.DictReader(f))
        curve = shown["curve"]
        if curve["epochs"] == 0:
            continue
        col = [float(r[curve["column"]]) for r in rows if r[curve["column"]] not in ("", "nan")]
        assert curve["epochs"] == len(col)
        assert curve["first"] == col[0] and curve["last"] == col[-1]
        assert curve["best"] == min(col) and curve["best_epoch"] == int(np.argmin(col))


# ------------------------------------------------------------------------------------ 1 n-gram


def test_ngram_probability_matches_an_independent_kneser_ney():
    g = run_page("01_ngram")
    BOS, EOS, PAD, V = g["BOS"], g["EOS"], g["PAD"], g["V"]
    sents = [[g["ID"][w] for w in s.split()] + [EOS] for s in g["SENTENCES"]]
    tri = [tuple(([BOS, BOS, *s])[i : i + 3]) for s in sents for i in range(len(s))]
    tri_count: dict = {}
    for t in tri:
        tri_count[t] = tri_count.get(t, 0) + 1
    bi_cont: dict = {}
    for t in tri_count:  # distinct left extensions of each bigram
        bi_cont[t[1:]] = bi_cont.get(t[1:], 0) + 1
    uni_cont: dict = {}
    for b in bi_cont:
        uni_cont[b[1:]] = uni_cont.get(b[1:], 0) + 1

    def discounts(counts):
        n = [sum(1 for c in counts if c == r) for r in (1, 2, 3, 4)]
        y = n[0] / (n[0] + 2 * n[1])
        raw = [
            1 - 2 * y * n[1] / n[0] if n[0] else None,
            2 - 3 * y * n[2] / n[1] if n[1] else None,
            3 - 4 * y * n[3] / n[2] if n[2] else None,
        ]
        fallback = (0.5, 1.0, 1.5)
        return [d if d is not None and 0 < d < i + 1 else fallback[i] for i, d in enumerate(raw)]

    D3, D2, D1 = (discounts(list(t.values())) for t in (tri_count, bi_cont, uni_cont))
    for order, D in ((1, D1), (2, D2), (3, D3)):
        close(g["RESULTS"]["discounts"][order], D)
    words = [i for i in range(V) if i not in (BOS, PAD)]

    def level(table, hist, w, D, lower):
        counts = {k[-1]: c for k, c in table.items() if k[:-1] == hist}
        total = sum(counts.values())
        dc = lambda c: 0 if c == 0 else D[min(c, 3) - 1]  # noqa: E731
        gamma = sum(dc(c) for c in counts.values()) / total
        c = counts.get(w, 0)
        return max(c - dc(c), 0) / total + gamma * lower

    on, the, mat = g["ID"]["on"], g["ID"]["the"], g["ID"]["mat"]
    p1 = level(uni_cont, (), mat, D1, 1 / len(words))
    p2 = level(bi_cont, (the,), mat, D2, p1)
    p3 = level(tri_count, (on, the), mat, D3, p2)
    assert math.isclose(g["RESULTS"]["p_mat_on_the"], p3, rel_tol=1e-12)
    assert p3 < 1.0  # the unsmoothed estimate c(on the mat) / c(on the) would be 1
    assert math.isclose(g["RESULTS"]["distribution_sum"], 1.0, rel_tol=1e-12)


# -------------------------------------------------------------------------------------- 2 NNLM


def test_nnlm_forward_pass_by_hand():
    r = run_page("02_nnlm")["RESULTS"]
    C = np.arange(1, 19).reshape(6, 3) / 10
    H = np.arange(1, 13).reshape(2, 6) / 10
    d = np.array([0.1, 0.2])
    U, W, b = np.array(r["U"]), np.array(r["W"]), np.array(r["b"])
    x = np.concatenate([C[4], C[3]])  # sat, on
    close(r["x"], x)
    close(r["Hx"], H @ x)
    close(r["Hx"], [2.53, 7.03], 1e-12)
    assert not np.allclose(r["Hx"], [4.81, 11.23], atol=0.5)
    a = np.tanh(d + H @ x)
    close(r["hidden"], a)
    y = b + W @ x + U @ a
    close(r["logits"], y)
    close(r["probs"], softmax(y))
    close(r["loss_sat_on"], -np.log(softmax(y)[0]))
    p_ex = softmax([0.5, 0.2, 0.9, -1.2, 0.1, 0.8])
    close(r["example_probs"], p_ex)
    assert abs(r["example_probs"][0] - 0.17) > 0.01  # the example's printed P(a) is off
    x2 = np.concatenate([C[0], C[1]])
    y2 = b + W @ x2 + U @ np.tanh(d + H @ x2)
    close(r["probs_a_cat"], softmax(y2))
    close(r["loss_a_cat"], -np.log(softmax(y2)[4]))
    assert r["q_toy"] == 2 * 3 + 2 * 3 * 2 + 2 * 6
    assert r["q_direct"] == 2 * 3 + 2 * 3 * 2 + (2 + 2 * 3) * 6
    assert r["q_paper_softmax"] == 10 * 500 + 10 * 500 * 500 + 500 * 10**6
    close(r["q_paper_hierarchical"], 10 * 500 + 10 * 500 * 500 + 500 * np.log2(10**6), 1e-6)


# ---------------------------------------------------------------------------- 3 word vectors


def test_word2vec_and_glove_by_hand():
    g = run_page("03_word2vec_glove")
    r = g["RESULTS"]
    Vin = np.arange(1, 19).reshape(6, 3) / 10
    U = g["U_OUT"].numpy()
    a, cat, on, sat, mat, the = 0, 1, 3, 4, 2, 5
    h = Vin[[a, cat, on, a]].mean(0)
    close(r["h"], h)
    close(r["cbow_full_softmax"], softmax(U @ h))

    def ns(v):
        return -(log_sigmoid(U[sat] @ v) + log_sigmoid(-(U[mat] @ v)) + log_sigmoid(-(U[the] @ v)))

    close(r["cbow_loss"], ns(h))
    pairs = [ns(Vin[c]) for c in (a, cat, on, a)]
    close(r["skipgram_pair_losses"], pairs)
    close(r["skipgram_loss"], sum(pairs))
    close(r["tree_total"], 1.0)
    close(r["tree_loss"], -np.log(r["tree_probs"]["sat"]))
    close(r["costs"]["cbow/negative"], 4 * 3 + 3 * 3)
    close(r["costs"]["skipgram/negative"], 2 * (3 + 3 * 3))
    close(r["costs"]["cbow/hierarchical"], 4 * 3 + 3 * np.log2(10))
    # co-occurrences with a window of one word, within sentences
    words = g["GWORDS"]
    X = np.zeros((6, 6))
    for s in g["CORPUS"]:
        ids = [words.index(w) for w in s.split()]
        for i, j in itertools.pairwise(ids):
            X[i, j] += 1
            X[j, i] += 1
    close(r["glove_X"], X)
    xs = np.array([1.0, 2.0, 50.0, 100.0, 400.0])
    close(r["glove_f_paper"], np.minimum((xs / 100) ** 0.75, 1))
    W = np.array(r["glove_W"])
    Wc = W[::-1]
    i, j = np.nonzero(X)
    e = (W[i] * Wc[j]).sum(1) + 0.1 - np.log(X[i, j])
    f = np.minimum((X[i, j] / 100) ** 0.75, 1)
    close(r["glove_J"], (f * e * e).sum())
    close(r["glove_mean_half"], 0.5 * (f * e * e).sum() / len(i))


# ---------------------------------------------------------------------------------- 4 RNN/LSTM


def test_rnn_and_lstm_states_by_hand():
    g = run_page("04_rnn_lstm")
    r = g["RESULTS"]
    E, Wih, Whh, b, U = (g[k].numpy() for k in ("E", "W_IH", "W_HH", "B_H", "U"))
    ids = [g["ID"][w] for w in g["sentence"]]
    h = np.zeros(2)
    states, probs = [], []
    for i in ids:
        h = np.tanh(Wih @ E[i] + b + Whh @ h)
        states.append(h)
        probs.append(softmax(U @ h))
    close(r["rnn_states"], states)
    close(r["rnn_module_final"], states[-1])
    close(r["rnn_probs"], probs)
    targets = g["targets"][0].tolist()
    close(r["rnn_loss"], np.mean([-np.log(p[t]) for p, t in zip(probs, targets, strict=True)]))
    Wi, Wh, bi = (np.array(m) for m in r["lstm_weights"])
    sig = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
    h, c = np.zeros(2), np.zeros(2)
    lstm_probs = []
    for i in ids:
        z = Wi @ E[i] + bi + Wh @ h
        c = sig(z[2:4]) * c + sig(z[0:2]) * np.tanh(z[4:6])
        h = sig(z[6:8]) * np.tanh(c)
        lstm_probs.append(softmax(U @ h))
    close(r["lstm_module_final"][0], h)
    close(r["lstm_module_final"][1], c)
    close(
        r["lstm_loss"], np.mean([-np.log(p[t]) for p, t in zip(lstm_probs, targets, strict=True)])
    )
    out = 128 * 10_000
    assert r["costs"]["rnnx1"] == 128 * (300 + 128) + out
    assert r["costs"]["lstmx2"] == 4 * 128 * (300 + 128) + 4 * 128 * (128 + 128) + out


# ----------------------------------------------------------------------------------- 5 seq2seq


def test_seq2seq_reversal_state_and_loss():
    g = run_page("05_seq2seq")
    r = g["RESULTS"]
    pad = g["PAD"]
    for row, rev in zip(r["src"], r["reversed"], strict=True):
        words = [i for i in row if i != pad]
        assert rev == words[::-1] + [pad] * (len(row) - len(words))
    logp = np.log(softmax(r["logits"]))
    nll = [-logp[t, y] for t, y in enumerate(r["labels"])]
    close(r["loss"], np.mean(nll))
    close(r["stepwise_nll"], nll)
    assert r["cost_toy"] == 2 * (4 * 2 * (3 + 2) + 4 * 2 * (2 + 2)) + 2 * 10
    assert r["cost_paper"] == 2 * 4 * (4 * 1000 * 2000) + 1000 * 80_000


# --------------------------------------------------------------------------------- 6 attention


def test_additive_attention_by_hand():
    r = run_page("06_attention")["RESULTS"]
    s, Hs = np.array(r["s_prev"]), np.array(r["annotations"])
    Wa, Ua, bU, va = (np.array(r[k]) for k in ("W_a", "U_a", "b_U", "v_a"))
    e = np.tanh(Wa @ s + Hs @ Ua.T + bU) @ va
    close(r["scores"], e)
    alpha = softmax(e)
    close(r["alpha"], alpha)
    close(r["context"], alpha @ Hs)
    close(r["alpha_masked"], np.r_[softmax(e[:2]), 0.0])
    shapes = r["shapes"]
    assert shapes["annotations"] == [1, 10, 256] and shapes["keys"] == [1, 10, 64]
    assert shapes["cell_input"] == 100 + 256 and shapes["output_input"] == 100 + 128 + 256
    assert shapes["logits"] == [1, 3, 10_000]


# ------------------------------------------------------------------------------- 7 transformer


def _attend(q, k, v, causal, scale):
    s = q @ k.T / (np.sqrt(q.shape[1]) if scale else 1.0)
    if causal:
        s = np.where(np.tril(np.ones_like(s)) > 0, s, -np.inf)
    a = softmax(s)
    return a @ v, a


def test_transformer_layer_by_hand():
    r = run_page("07_transformer")["RESULTS"]
    i = {k: np.array(v) for k, v in r["inputs"].items()}
    Z1, A1 = _attend(i["Q1"], i["K1"], i["V1"], True, False)
    close(r["A1"], A1)
    close(r["Z1"], Z1)
    Z1s, A1s = _attend(i["Q1"], i["K1"], i["V1"], True, True)
    close(r["A1_scaled"], A1s)
    close(r["Z1_scaled"], Z1s)
    assert not np.allclose(A1, A1s, atol=1e-3)  # the scaling changes the weights
    close(r["A2"], i["A2_given"], 1e-12)
    out = np.hstack([Z1, i["A2_given"] @ i["V2"]]) @ i["W_O"]
    close(r["mha_out"], out)
    s = i["X"] + out
    ln = (s - s.mean(1, keepdims=True)) / np.sqrt(s.var(1, keepdims=True) + 1e-5)
    close(r["out1"], ln)
    cross, cw = _attend(i["out1_given"], i["enc"], i["enc"], False, False)
    close(r["cross_weights"], cw)
    close(r["cross_out"], cross)
    ffn = np.maximum(i["out2"] @ i["W1"] + i["b1"], 0) @ i["W2"] + i["b2"]
    close(r["ffn_out"], ffn)


# ------------------------------------------------------------------------------ 8 decoder-only


def test_output_layer_loss_gradient_and_prompt_mask():
    r = run_page("08_decoder_only")["RESULTS"]
    i = {k: np.array(v) for k, v in r["inputs"].items()}
    logits = i["dec_out"] @ i["W_out"] + i["b_out"]
    close(r["logits"], logits)
    p = softmax(logits)
    close(r["probs"], p)
    t = i["targets"]
    nll = -np.log(p[np.arange(4), t])
    close(r["per_position"], nll)
    close(r["loss"], nll.mean())
    y = np.eye(6)[t]
    close(r["grad_pos0"], (p[0, 0] - y[0, 0]) * i["dec_out"][0, 0])
    close(r["grad_mean"], ((p[:, 0] - y[:, 0]) * i["dec_out"][:, 0]).mean())
    assert r["causal_changed"] == [False, False, False, True]
    labels = r["sequence_labels"]
    sep = r["sequence"].index(4)
    assert all(lab == -100 for lab in labels[:sep])
    assert labels[sep:] == [*r["sequence"][sep + 1 :], 2]
    close(r["mt_loss"], r["mt_loss_labelled"])
    assert abs(r["mt_loss"] - r["mt_loss_everything"]) > 1e-3
    assert r["cost"] == 1 * (4 * 16 + 2 * 4 * 8 + 2 * 8 * 4) + 4 * 6


def test_pages_are_deterministic():
    # a second run of a page (random weights under a fixed seed) gives the same numbers
    first = run_page("05_seq2seq")["RESULTS"]["loss"]
    again = _run("05_seq2seq")
    assert again["RESULTS"]["loss"] == first


def test_neighbours_read_a_trained_runs_vectors_and_are_skipped_without_one(tmp_path, monkeypatch):
    if str(PAGES_DIR) not in sys.path:
        sys.path.insert(0, str(PAGES_DIR))
    import _common

    monkeypatch.setattr(_common, "ROOT", tmp_path)
    assert _common.neighbours("skipgram", ["king"]) == {}
    folder = tmp_path / "models" / "skipgram"
    folder.mkdir(parents=True)
    rows = ["4 2", "king 1 0", "queen 0.9 0.2", "apple 0 1", "pear -0.1 1"]
    (folder / "vectors.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")
    found = _common.neighbours("skipgram", ["king", "apple", "absent"], k=2)
    assert found == {"king": ["queen", "apple"], "apple": ["pear", "queen"]}
