"""The packed backward's table of key blocks (api._key_blocks), against the blocks written out one by one:
every sequence's blocks in order, each row (sequence, first query row, query count, first key, key count,
the block's first key), then rows with no keys, as many as the most blocks any offsets can make."""
import itertools

import pytest
import torch

from tiles.api import _key_blocks


def _by_hand(lq, lk, BN, rows):
    cq, ck = [0, *itertools.accumulate(lq)], [0, *itertools.accumulate(lk)]
    out = [[b, cq[b], lq[b], ck[b], n, j] for b, n in enumerate(lk) for j in range(0, n, BN)]
    last = len(lk) - 1
    return out + [[last, cq[last], 0, ck[last], 0, 0]] * (rows - len(out))


@pytest.mark.parametrize("lq,lk,BN", [([5, 130, 0, 64, 300], [7, 200, 3, 64, 300], 64),
                                      ([1, 257, 128], [1, 129, 500], 128),
                                      ([90, 0, 33], [90, 0, 400], 128),
                                      ([3], [0], 64),
                                      ([0, 0], [128, 128], 128)])
def test_key_blocks_list_every_sequences_blocks(lq, lk, BN):
    cq = torch.tensor([0, *itertools.accumulate(lq)], dtype=torch.int32)
    ck = torch.tensor([0, *itertools.accumulate(lk)], dtype=torch.int32)
    table = _key_blocks(cq, ck, BN, sum(lk))
    rows = max((sum(lk) + len(lk) * (BN - 1)) // BN, 1)
    assert table.dtype == torch.int32 and table.shape == (rows, 6) and table.is_contiguous()
    assert table.tolist() == _by_hand(lq, lk, BN, rows)


def test_key_blocks_bound_every_offsets():
    """The grid is sized with no read of the offsets: no split of 1000 keys into 7 sequences has more
    blocks than the table's rows."""
    g = torch.Generator().manual_seed(0)
    for _ in range(200):
        cuts = torch.sort(torch.randint(0, 1001, (6,), generator=g)).values
        ck = torch.cat([torch.tensor([0]), cuts, torch.tensor([1000])]).to(torch.int32)
        lens = (ck[1:] - ck[:-1]).tolist()
        assert sum(-(-n // 128) for n in lens) <= _key_blocks(torch.zeros(8, dtype=torch.int32), ck, 128, 1000).shape[0]
