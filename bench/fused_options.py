"""The fused attention backward for a bench script: `use_fused()` makes tiles.attention's backward run
attention_bwd_fused on the Hopper backend, with the schedule options named in FUSED_OPTIONS (a,b: each
turned on) over what SCHEDULES launches, at both head dims."""
import os


def use_fused() -> None:
    from tiles.backends.hopper.backend import HopperBackend
    from tiles.backends.hopper.lower_attention import WarpSpecializedLowering as W

    HopperBackend.FUSED_BACKWARD = True
    for key in (("attention_bwd_fused", 128), ("attention_bwd_fused", 64)):
        W.SCHEDULES[key] = {**W.SCHEDULES[key], **{o: True for o in os.environ.get("FUSED_OPTIONS", "").split(",") if o}}
