"""Datasets over a language-model token stream (see `nlpzoo.data.vocab` for the stream format).

Fixed-window models (Bengio's NNLM) predict token t from the n-1 tokens before it. The stream is
left-padded with `</s>` (a sentence end precedes the first sentence), and each item is a window:

    stream   </s> </s> | w0  w1  w2  </s> w3 ...
    item t   context = padded[t : t+n-1],  target = stream[t]        (n-1 = 2 shown)

Every token of the stream is a target exactly once, so summing the NLL over the dataset scores
exactly the tokens DESIGN §5 counts.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import Dataset

from nlpzoo.data.vocab import EOS


class ContextWindows(Dataset):
    """(context (n-1,), target) pairs for every position of a stream; batched fetch supported."""

    def __init__(self, stream: np.ndarray, context_size: int) -> None:
        s = torch.as_tensor(np.asarray(stream, dtype=np.int64))
        pad = torch.full((context_size,), EOS, dtype=torch.int64)
        padded = torch.cat([pad, s])
        self.windows = padded.unfold(0, context_size + 1, 1)  # (N, n) view, no copy
        self.context_size = context_size

    def __len__(self) -> int:
        return self.windows.shape[0]

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        w = self.windows[i]
        return w[:-1], w[-1]

    def __getitems__(self, idx: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        w = self.windows[torch.as_tensor(idx)]  # (B, n)
        return w[:, :-1], w[:, -1]


def collate_batched(batch: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """`__getitems__` already returns a batch; the DataLoader must pass it through unchanged."""
    return batch
