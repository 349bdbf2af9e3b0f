"""Packed sequences' tables of blocks (api._blocks): the forward's and dQ's query blocks, dK / dV's key
blocks, against the blocks written out one by one. Each row (sequence, first query row, query count,
first key, key count, the block's first row or key), every block of every sequence, heaviest first
(stably), then rows with nothing in them, as many as the most blocks any offsets can make."""
import itertools

import pytest
import torch

from tiles.api import _blocks


def _by_hand(lq, lk, size, rows, causal, keys):
    cq, ck = [0, *itertools.accumulate(lq)], [0, *itertools.accumulate(lk)]
    out, work = [], []
    for b in range(len(lq)):
        for j in range(0, lk[b] if keys else lq[b], size):
            out.append([b, cq[b], lq[b], ck[b], lk[b], j])
            if keys:  # the query rows r that see key block [j, j + size): j <= r + lk - lq for the first key
                seen = sum(1 for r in range(lq[b]) if not causal or j <= r + lk[b] - lq[b])
            else:  # the keys some row of the block sees
                seen = sum(1 for c in range(lk[b]) if not causal or c <= min(j + size, lq[b]) - 1 + lk[b] - lq[b])
            work.append(seen if lq[b] and lk[b] else -1)
    order = sorted(range(len(out)), key=lambda i: -work[i])
    last = len(lq) - 1
    return [out[i] for i in order] + [[last, cq[last], 0, ck[last], 0, 0]] * (rows - len(out))


CASES = [([5, 130, 0, 64, 300], [7, 200, 3, 64, 300], 64),
         ([1, 257, 128], [1, 129, 500], 128),
         ([90, 0, 33], [90, 0, 400], 128),
         ([3], [0], 64),
         ([0, 0], [128, 128], 128),
         ([300, 40, 300], [300, 40, 300], 64)]


@pytest.mark.parametrize("lq,lk,size", CASES)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("keys", [False, True], ids=["query_blocks", "key_blocks"])
def test_blocks_list_every_sequences_blocks_heaviest_first(lq, lk, size, causal, keys):
    cq = torch.tensor([0, *itertools.accumulate(lq)], dtype=torch.int32)
    ck = torch.tensor([0, *itertools.accumulate(lk)], dtype=torch.int32)
    total = sum(lk) if keys else sum(lq)
    table = _blocks(cq, ck, size, total, causal, keys=keys)
    rows = max((total + len(lq) * (size - 1)) // size, 1)
    assert table.dtype == torch.int32 and table.shape == (rows, 6) and table.is_contiguous()
    assert table.tolist() == _by_hand(lq, lk, size, rows, causal, keys)


def test_causal_query_blocks_come_longest_diagonal_first():
    """Causal, a query block's work grows with its last row: the last block of the longest sequence first,
    the first blocks (one key block each) last."""
    lq = [256, 512, 128]
    cu = torch.tensor([0, *itertools.accumulate(lq)], dtype=torch.int32)
    table = _blocks(cu, cu, 128, sum(lq), True).tolist()
    assert table[0][:2] == [1, 256] and table[0][5] == 384
    assert [r[5] for r in table[4:7]] == [0, 0, 0]


def test_blocks_bound_every_offsets():
    """The grid is sized with no read of the offsets: no split of 1000 rows into 7 sequences has more
    blocks than the table's rows."""
    g = torch.Generator().manual_seed(0)
    for _ in range(200):
        cuts = torch.sort(torch.randint(0, 1001, (6,), generator=g)).values
        cu = torch.cat([torch.tensor([0]), cuts, torch.tensor([1000])]).to(torch.int32)
        lens = (cu[1:] - cu[:-1]).tolist()
        for keys in (False, True):
            other = torch.zeros(8, dtype=torch.int32)
            cq, ck = (other, cu) if keys else (cu, other)
            assert sum(-(-n // 128) for n in lens) <= _blocks(cq, ck, 128, 1000, False, keys=keys).shape[0]
