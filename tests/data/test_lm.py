"""Datasets over a token stream and the scoring passes built on them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nlpzoo.data.lm import BPTTBlocks, StreamBlocks, _Shard, lm_dataloaders
from nlpzoo.evaluation.perplexity import recurrent_log_probs, sliding_log_probs
from nlpzoo.families import FAMILIES
from nlpzoo.models import rnn_lm, transformer_lm


def test_bptt_target_of_t_is_input_of_t_plus_1_across_batch_boundaries():
    stream = np.arange(103)
    ds = BPTTBlocks(stream, batch_size=4, bptt=5)
    rows = torch.cat([ds[i][0] for i in range(len(ds))], dim=1)  # (B, L-1)
    targets = torch.cat([ds[i][1] for i in range(len(ds))], dim=1)
    assert torch.equal(targets[:, :-1], rows[:, 1:])  # shifted by one, across window edges
    for i in range(len(ds) - 1):  # last target of window i == first input of window i+1
        assert torch.equal(ds[i][1][:, -1], ds[i + 1][0][:, 0])
    assert torch.equal(rows[:, 0], torch.tensor([0, 25, 50, 75]))  # contiguous rows of 25
    assert rows.shape[1] == 24 and len(ds) == 5  # 24 predictions per row, windows of 5 (last 4)


def test_bptt_rows_are_split_between_ranks():
    stream = np.arange(80)
    r0 = BPTTBlocks(stream, batch_size=2, bptt=4, rank=0, world=2)
    r1 = BPTTBlocks(stream, batch_size=2, bptt=4, rank=1, world=2)
    assert torch.equal(r0[0][0][:, 0], torch.tensor([0, 20]))
    assert torch.equal(r1[0][0][:, 0], torch.tensor([40, 60]))


def test_stream_blocks_cover_the_stream_in_order():
    ds = StreamBlocks(np.arange(50), block_size=8)
    assert len(ds) == 6
    x, y = ds[2]
    assert torch.equal(x, torch.arange(16, 24)) and torch.equal(y, torch.arange(17, 25))


def test_shards_partition_without_padding():
    ds = StreamBlocks(np.arange(100), block_size=9)
    shards = [_Shard(ds, r, 3) for r in range(3)]
    seen = sorted(int(s[i][0][0]) for s in shards for i in range(len(s)))
    assert seen == [int(ds[i][0][0]) for i in range(len(ds))]


def _naive_log_probs(model, stream, context):
    """One forward pass per token, with at most `context` previous tokens (EOS before the start)."""
    x = torch.cat([torch.tensor([2]), torch.as_tensor(stream)])
    out = []
    for t in range(len(stream)):
        lo = max(0, t + 1 - context)
        inp, tgt = x[lo : t + 1][None], x[lo + 1 : t + 2][None]
        out.append(float(model.token_log_probs(inp, tgt)[0, -1]))
    return np.array(out)


def test_sliding_window_scores_every_token_once_with_enough_context():
    torch.manual_seed(0)
    cfg = transformer_lm.Config(
        d_model=16, heads=2, num_layers=1, d_ff=32, block_size=8, dropout=0.0
    )
    model = transformer_lm.TransformerLM(cfg, 20).eval()
    stream = np.random.default_rng(0).integers(4, 20, size=37)
    got = sliding_log_probs(model, stream, block_size=8, stride=4, batch_size=3)
    # token t sees the previous min(t, 4 + (t mod 4)) tokens, between block - stride and block
    x = torch.cat([torch.tensor([2]), torch.as_tensor(stream)])
    for t in range(len(stream)):
        first_window_end = 8
        if t < first_window_end:
            lo = 0
        else:
            end = min(((t - first_window_end) // 4 + 1) * 4 + first_window_end, len(stream))
            lo = end - 8
        lp = model.token_log_probs(x[lo : t + 1][None], x[lo + 1 : t + 2][None])[0, -1]
        assert got[t] == pytest.approx(float(lp), abs=1e-5), t


def test_recurrent_pass_equals_one_long_sequence():
    torch.manual_seed(0)
    cfg = rnn_lm.Config(cell="lstm", emb_dim=8, hidden_dim=8, num_layers=2, dropout=0.0)
    model = rnn_lm.RNNLM(cfg, 15).eval()
    stream = np.random.default_rng(1).integers(4, 15, size=50)
    got = recurrent_log_probs(model, stream, chunk=7)  # chunks do not divide the stream
    x = torch.cat([torch.tensor([2]), torch.as_tensor(stream)])
    with torch.no_grad():
        whole, _ = model.token_log_probs(x[:-1][None], x[1:][None])
    np.testing.assert_allclose(got, whole[0].double().numpy(), atol=1e-5)
    assert got.shape == (50,)


def test_loaders_follow_the_family_input_shape():
    stream = np.random.default_rng(0).integers(4, 30, size=500)
    cfg = rnn_lm.Config(bptt=10, batch_size=4)
    train, _ = lm_dataloaders(FAMILIES["rnn_lm"], cfg, stream, stream)
    x, y = next(iter(train))
    assert x.shape == (4, 10) and torch.equal(x[:, 1:], y[:, :-1])
    cfg = transformer_lm.Config(block_size=16, batch_size=5)
    train, _ = lm_dataloaders(FAMILIES["transformer_lm"], cfg, stream, stream)
    x, y = next(iter(train))
    assert x.shape == (5, 16) and torch.equal(x[:, 1:], y[:, :-1])
