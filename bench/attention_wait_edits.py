"""Session 29: where the D = 128 forward waits for the previous block's P V.

    PYTHONPATH=.:bench:tests/hopper python3 bench/attention_wait_edits.py [all] [check]

The rotated loop issues P V of block j-1 right after S of block j, so that it runs under block j's
softmax (FlashAttention-3's overlap within a warpgroup); the source waits for it (`mma_wait<0>(o)`)
only before O's rescale and the cast of P, which reads the registers that P V is still reading. The
launched SASS has that wait (`WARPGROUP.DEPBAR.LE gsb0, 0x0`) four FMNMX into the row maximum: the
compiler hoisted it, so the whole softmax of block j waits for P V of block j-1.

* `pin`: a named barrier over the warpgroup's 128 threads (id 3 + cw, unused by the kernel) between the
  row sum and the wait, with the exponentials and the row sum tied to it by an empty asm: the compiler
  does not move the wait above a barrier (session 25 found nothing else that holds code ahead of a
  wgmma wait). The same arithmetic in the same order: the output must be the launched one's to the bit.
* `pin_store`: the barrier after a store of the row sum (which reads every exponential) to a word of
  shared memory: the store cannot sink below the barrier, nor the exponentials below the store.
* `pin_max`: the same barrier after the row maximum instead (the exponentials may then sink below it).
"""
import sys

import attention_split as split

PIN = r"""
// ---- session 29 experiment (bench/attention_wait_edits.py): keep the softmax ahead of the wait for P V
template <int R, int C>
__device__ __forceinline__ void pin_softmax(rt<float, R, C>& s, rv<R>& l, int cw) {
#pragma unroll
  for (int i = 0; i < s.slices; ++i)
#pragma unroll
    for (int p = 0; p < s.pairs; ++p) asm volatile("" : "+f"(s.v[i][p].x), "+f"(s.v[i][p].y));
#pragma unroll
  for (int i = 0; i < l.slices; ++i) asm volatile("" : "+f"(l.v[i][0]), "+f"(l.v[i][1]));
  arch::bar_sync(3 + cw, 128);
}
// The row sum, which reads every exponential, stored to shared memory ahead of the barrier: a store
// cannot sink below a barrier, so neither can the exponentials it depends on.
__device__ __forceinline__ void pin_by_store(const rv<64>& l, float* scratch, int cw) {
  *reinterpret_cast<volatile float*>(scratch + cw) = l.v[0][0] + l.v[0][1];
  arch::bar_sync(3 + cw, 128);
}
template <int R>
__device__ __forceinline__ void pin_row(rv<R>& m, int cw) {
#pragma unroll
  for (int i = 0; i < m.slices; ++i) asm volatile("" : "+f"(m.v[i][0]), "+f"(m.v[i][1]));
  arch::bar_sync(3 + cw, 128);
}
"""

WAIT = "        mma_wait<0>(o);\n"
SUM = "        row_sum_partial(l, s, l);  // this lane's columns: the quad's lanes are added after the loop\n"


def _once(src, old, new, count):
    if src.count(old) != count:
        raise RuntimeError(f"{old!r} is not in the launched source {count} times")
    return src.replace(old, new)


def _helpers(src):
    return _once(src, "using namespace tiles;\n", "using namespace tiles;\n" + PIN, 1)


def pin(src):
    return _helpers(_once(src, WAIT, "        pin_softmax(s, l, cw);  // the softmax before the wait for P V\n" + WAIT, 1))


def pin_store(src):
    src = _once(src, "  barrier once_empty[1];", "  float pin[2];  // each consumer warpgroup's scratch word (pin_by_store)\n  barrier once_empty[1];", 1)
    return _helpers(_once(src, WAIT, "        pin_by_store(l, S.pin, cw);  // the softmax before the wait for P V\n" + WAIT, 1))


def pin_max(src):
    old = f"        row_max_scaled<true>(m_new, s, {split.C}, m);\n"
    src = _once(src, old, old + "        pin_row(m_new, cw);  // the maximum before the wait for P V\n", 2)
    return _helpers(src)


# pin and pin_max leave the exponentials below the barrier (the SASS: 46 and 45 of 66 MUFU after it), so
# the first call times pin_store alone; `all` times them too
VARIANTS = {"pin_store": pin_store}
if sys.argv[1:2] == ["all"]:
    VARIANTS.update(pin=pin, pin_max=pin_max)
    sys.argv.pop(1)

if __name__ == "__main__":
    split.check(VARIANTS) if sys.argv[1:] == ["check"] else split.main(VARIANTS, exact=True)
