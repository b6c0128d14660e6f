"""Training cost per token as the papers count it: multiply-adds Q per training example.

Mikolov et al. (2013a) compare architectures by Q, the work per training word:

    NNLM       Q = N×D + N×D×H + H×V          (hierarchical softmax: H×log₂V for the last term)
    CBOW       Q = N×D + D×log₂V              (N context words)
    skip-gram  Q = C×(D + D×log₂V)            (C the largest distance of a context word)

with negative sampling, log₂V becomes K + 1 (K noise words and the target). The counterparts
used for the other families count the matrix products of one forward pass per predicted token the
same way (biases, nonlinearities and look-ups left out):

    RNN / LSTM   Q = Σ_l g×H×(in_l + H) + H×V                       g = 1 (tanh), 4 (LSTM gates)
    Transformer  Q = L×(4C² + 2C×F + 2T×C) + C×V                    F = d_ff, T = block_size
    GloVe        Q = 2D per non-zero X_ij (one dot product and its gradient) — a per-entry, not
                 per-token, cost

Translation, per target token, with one source token per target token (Multi30k's sides are about
as long) and S = T = 16 pieces for the attention spans (about a Multi30k sentence):

    seq2seq      Q = 2 Σ_l 4H×(in_l + H) + H×V                       encoder and decoder LSTMs
    attention    Q = 2gH(E+H) + 2H×A + gH(E+3H) + H×A + S×(A+2H) + (E+3H)×V   (see `attention`)
    transformer  Q = N×(4C² + 2C×F + 2S×C) + N×(8C² + 2C×F + 2T×C + 2S×C) + C×V
    decoder_mt   Q = (S+T)/T × (L×(4C² + 2C×F + 2(S+T)×C) + C×V)     prompt and target positions

A run is described by its family and its own params section; a family not known here gets no formula
(its model's own `cost_per_token`, when the metrics carry one, is still shown).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass
class Cost:
    formula: str  # symbolic, as the paper writes it
    sizes: str  # the symbols' values for this run
    q: float | None  # multiply-adds per token (or per entry, see `unit`); None: model counts it
    unit: str = "token"


def _output(width: int, sym_w: str, kind: str, v: int) -> tuple[float | None, str]:
    """The output layer's term: softmax width×V, hierarchical width×log₂V (a balanced tree; a
    Huffman tree's mean path is a little shorter), adaptive: only the model can count it."""
    if kind == "hierarchical":
        return width * math.log2(v), f"{sym_w}×log₂V"
    if kind == "adaptive":
        return None, "adaptive(H, V)"
    return width * v, f"{sym_w}×V"


def nnlm(cfg: dict, v: int) -> Cost:
    n, d, h = cfg.get("context_size", 4), cfg.get("emb_dim", 60), cfg.get("hidden_dim", 100)
    direct = bool(cfg.get("direct", False))
    width = h + (n * d if direct else 0)
    last, sym_last = _output(width, "(H + N×D)" if direct else "H", cfg.get("output", "softmax"), v)
    q = None if last is None else n * d + n * d * h + last
    return Cost(f"N×D + N×D×H + {sym_last}", f"N={n}, D={d}, H={h}, V={v:,}", q)


def rnn_lm(cfg: dict, v: int) -> Cost:
    d, h, layers = cfg.get("emb_dim", 200), cfg.get("hidden_dim", 200), cfg.get("num_layers", 1)
    lstm = cfg.get("cell", "rnn") == "lstm"
    g = 4 if lstm else 1
    last, sym_last = _output(h, "H", cfg.get("output", "softmax"), v)
    recurrent = sum(g * h * ((d if i == 0 else h) + h) for i in range(layers))
    q = None if last is None else recurrent + last
    return Cost(
        f"Σ_l g×H×(in_l + H) + {sym_last}",
        f"g={g} ({'LSTM' if lstm else 'tanh RNN'}), L={layers}, D={d}, H={h}, V={v:,}",
        q,
    )


def transformer_lm(cfg: dict, v: int) -> Cost:
    c, f = cfg.get("d_model", 192), cfg.get("d_ff", 768)
    layers, t = cfg.get("num_layers", 2), cfg.get("block_size", 128)
    q = layers * (4 * c * c + 2 * c * f + 2 * t * c) + c * v
    return Cost("L×(4C² + 2C×F + 2T×C) + C×V", f"L={layers}, C={c}, F={f}, T={t}, V={v:,}", q)


def word2vec(cfg: dict, v: int) -> Cost:
    d, c = cfg.get("dim", 100), cfg.get("window", 5)
    if cfg.get("objective", "negative") == "hierarchical":
        out, sym_out, size_out = math.log2(v), "log₂V", f"V={v:,}"
    else:
        k = cfg.get("negative", 5)
        out, sym_out, size_out = k + 1, "(K+1)", f"K={k}"
    if cfg.get("model", "skipgram") == "cbow":
        n = 2 * c  # the context words on both sides
        return Cost(f"N×D + D×{sym_out}", f"N={n}, D={d}, {size_out}", n * d + d * out)
    return Cost(f"C×(D + D×{sym_out})", f"C={c}, D={d}, {size_out}", c * (d + d * out))


def glove(cfg: dict, v: int) -> Cost:
    d = cfg.get("dim", 100)
    return Cost("2D per non-zero X_ij", f"D={d}", 2 * d, unit="entry")


MT_SPAN = 16  # S = T: pieces per side of a typical Multi30k sentence, for attention terms


def seq2seq(cfg: dict, v: int) -> Cost:
    e, h, layers = cfg.get("emb_dim", 256), cfg.get("hidden_dim", 512), cfg.get("num_layers", 2)
    q = 2 * sum(4 * h * ((e if i == 0 else h) + h) for i in range(layers)) + h * v
    return Cost("2 Σ_l 4H×(in_l + H) + H×V", f"L={layers}, E={e}, H={h}, V={v:,}", q)


def attention(cfg: dict, v: int) -> Cost:
    """Bahdanau et al.: bidirectional encoder, U_a h_j once per source token, decoder cell on
    [E y; c], additive scores over S positions, context, deep output (maxout optional)."""
    e, h, a = cfg.get("emb_dim", 128), cfg.get("hidden_dim", 256), cfg.get("attn_dim", 128)
    g = 3 if cfg.get("cell", "gru") == "gru" else 4  # gate rows: GRU 3, LSTM 4
    m, s = cfg.get("maxout", 0), MT_SPAN
    out = (e + 3 * h) * 2 * m + m * v if m else (e + 3 * h) * v
    sym_out = "(E+3H)×2M + M×V" if m else "(E+3H)×V"
    q = 2 * g * h * (e + h) + 2 * h * a + g * h * (e + 3 * h) + h * a + s * (a + 2 * h) + out
    return Cost(
        f"2gH(E+H) + 2H×A + gH(E+3H) + H×A + S×(A+2H) + {sym_out}",
        f"g={g}, E={e}, H={h}, A={a}, S={s}" + (f", M={m}" if m else "") + f", V={v:,}",
        q,
    )


def transformer(cfg: dict, v: int) -> Cost:
    c, f, n = cfg.get("d_model", 256), cfg.get("d_ff", 1024), cfg.get("num_layers", 3)
    s = t = MT_SPAN
    enc = n * (4 * c * c + 2 * c * f + 2 * s * c)
    dec = n * (8 * c * c + 2 * c * f + 2 * t * c + 2 * s * c)
    return Cost(
        "N×(4C² + 2C×F + 2S×C) + N×(8C² + 2C×F + 2T×C + 2S×C) + C×V",
        f"N={n}, C={c}, F={f}, S=T={s}, V={v:,}",
        enc + dec + c * v,
    )


def decoder_mt(cfg: dict, v: int) -> Cost:
    """One causal sequence `source <sep> target`: every position runs the blocks and the output
    layer, so a target token costs (S+T)/T positions (= 2 at S = T)."""
    c, f, layers = cfg.get("d_model", 256), cfg.get("d_ff", 1024), cfg.get("num_layers", 6)
    span = 2 * MT_SPAN
    q = 2 * (layers * (4 * c * c + 2 * c * f + 2 * span * c) + c * v)
    return Cost(
        "(S+T)/T × (L×(4C² + 2C×F + 2(S+T)×C) + C×V)",
        f"L={layers}, C={c}, F={f}, S=T={MT_SPAN}, V={v:,}",
        q,
    )


FORMULAS = {
    "nnlm": nnlm,
    "rnn_lm": rnn_lm,
    "transformer_lm": transformer_lm,
    "word2vec": word2vec,
    "glove": glove,
    "seq2seq": seq2seq,
    "attention": attention,
    "transformer": transformer,
    "decoder_mt": decoder_mt,
}


def cost_of(family: str, cfg: dict | None, vocab_size: int | None) -> Cost | None:
    fn = FORMULAS.get(family)
    if fn is None or not vocab_size:
        return None
    return fn(dict(cfg or {}), int(vocab_size))
