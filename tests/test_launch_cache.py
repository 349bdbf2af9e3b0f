"""Prepared launches are reused only for calls that would launch exactly the same thing."""
import torch

from tiles.core.backend import LaunchCache, call_signature


def test_signature_tells_apart_what_a_launch_depends_on():
    a = torch.zeros(8, 16)
    base = call_signature("k", (a, 0.5), {"causal": True})
    assert base == call_signature("k", (a, 0.5), {"causal": True})
    same_memory = a.view(8, 16)  # another tensor object on the same bytes, same layout
    assert base == call_signature("k", (same_memory, 0.5), {"causal": True})
    different = [
        call_signature("other", (a, 0.5), {"causal": True}),
        call_signature("k", (a.clone(), 0.5), {"causal": True}),        # address
        call_signature("k", (a.view(16, 8), 0.5), {"causal": True}),    # shape
        call_signature("k", (a.t(), 0.5), {"causal": True}),            # strides
        call_signature("k", (a.view(torch.int32), 0.5), {"causal": True}),  # dtype
        call_signature("k", (a, 0.25), {"causal": True}),               # scalar value
        call_signature("k", (a, 0.5), {"causal": False}),               # keyword value
        call_signature("k", (a, 0.5), {"causal": True}, extra=("opt", 1)),
    ]
    assert all(d != base for d in different) and len(set(different)) == len(different)
    assert call_signature("k", (a, [1, 2]), {}) is None  # unhashable: never cached


def test_kernels_of_one_name_are_told_apart():
    """A kernel declared again under the same name (another overlap pattern, another body) is another
    kernel: a launch prepared for one is never reused for the other."""
    from tiles.core.patterns import Interleave
    from tiles.core.trace import KernelFn
    from tiles.kernels import attention_fwd

    again = KernelFn(attention_fwd.fn, Interleave(stages=2))
    a = torch.zeros(8, 16)
    assert again.name == attention_fwd.name
    assert call_signature(again, (a,), {}) != call_signature(attention_fwd, (a,), {})
    assert call_signature(attention_fwd, (a,), {}) == call_signature(attention_fwd, (a,), {})


def test_launch_cache_evicts_least_recently_used():
    c = LaunchCache(size=2)
    c.put(("a",), 1)
    c.put(("b",), 2)
    assert c.get(("a",)) == 1  # a is now the most recent
    c.put(("c",), 3)
    assert c.get(("b",)) is None and c.get(("a",)) == 1 and c.get(("c",)) == 3
    c.put(None, 4)
    assert c.get(None) is None
