"""Session 36: the forward's O store from registers, in other widths (edits of the launched source).

At S = 512 the O store bounds the D = 128 forward by 13 % (leaving it out runs 1.13-1.15x launched;
1.08x at 1k, 1.05x at 2k: `device_session36b.sh`). The launched store (ops.h store_wide, wide_stores = 2)
swaps pairs in the quad so that each lane writes 8 bytes of a row, 16 STG.64 a thread, each tested
against the tensor's bounds. The variants: 16-byte stores (four pairs a lane, 8 STG.128, two more
exchange rounds), 4-byte stores (32 STG.32, no exchange), and either with the bounds tested once a
tile (TILES_WHOLE_TILE_STORES: one store and no test a piece where the tile is whole). The output must
be the launched one's to the bit.

    PYTHONPATH=.:bench:tests/hopper python3 bench/attention_ostore.py [check | S ...]
"""
import sys

import attention_split as split

WIDE = "#define TILES_WIDE_STORES 2"


def _wide(n):
    def edit(src):
        assert src.count(WIDE) == 1
        return src.replace(WIDE, f"#define TILES_WIDE_STORES {n}" if n > 1 else "// (4-byte stores)")
    return edit


def _whole(edit):
    return lambda src: edit(src).replace("#include <tiles/tiles.h>", "#define TILES_WHOLE_TILE_STORES 1\n#include <tiles/tiles.h>", 1)


VARIANTS = {"wide4": _wide(4), "narrow": _wide(1), "whole": _whole(_wide(2)), "wide4_whole": _whole(_wide(4))}

if __name__ == "__main__":
    if sys.argv[1:] == ["check"]:
        split.check(VARIANTS)
    else:
        split.main(VARIANTS, exact=True, shapes=tuple(int(a) for a in sys.argv[1:]) or (512, 1024, 2048, 4096),
                   suite=True)
