// tiles CDNA shared (LDS) tiles: a row-major ROWS x COLS tile of 16-bit elements whose 16-byte chunks
// are XOR-swizzled inside each BLOCK-byte block (128: a line; 256: a line pair, for gfx950's 256-byte
// ds_read_b128 phases), so that the MFMA operand reads (ds_read_b128) and the stage writes hit distinct
// banks. The swizzle parameters are chosen per arch, tile shape and access pattern by the Python bank
// model (layouts.Swizzle, layouts.best_swizzle) and passed in by the template.
#pragma once
#include "prelude.h"

namespace tiles {

// chunk' = chunk ^ (((blk >> S1) ^ (blk >> S2)) & MASK), blk = byte offset / BLOCK, chunk = 16-byte chunk
// inside the block; S2 = 31: unused.
template <int ROWS, int COLS, int S1 = 0, int S2 = 31, int MASK = 0, int BLOCK = 128>
struct st {
  static constexpr int rows = ROWS, cols = COLS, elem_bytes = 2;
  static constexpr int row_bytes = COLS * 2;
  static constexpr int bytes = ROWS * row_bytes;
  static constexpr u32 block_shift = BLOCK == 256 ? 8u : 7u, chunk_mask = (u32)BLOCK / 16u - 1u;
  static_assert(BLOCK == 128 || BLOCK == 256, "swizzle blocks are one 128-byte line or a line pair");
  static_assert(row_bytes % 16 == 0, "LDS tile rows must be a multiple of 16 bytes");
  static_assert(row_bytes >= BLOCK ? row_bytes % BLOCK == 0 : BLOCK % row_bytes == 0, "rows must tile the swizzle blocks");
  static_assert(bytes % BLOCK == 0, "the tile must be whole swizzle blocks");
  static_assert(MASK < BLOCK / 16, "the XOR must stay inside the block");

  TILES_HD u32 swz(u32 blk) { return ((blk >> S1) ^ (S2 < 31 ? (blk >> S2) : 0u)) & (u32)MASK; }
  // byte offset of element (r, c) inside the tile
  TILES_HD u32 offset(u32 r, u32 c) {
    const u32 lin = r * (u32)row_bytes + c * 2u;
    const u32 blk = lin >> block_shift, chunk = (lin >> 4) & chunk_mask;
    return (blk << block_shift) | ((chunk ^ swz(blk)) << 4) | (lin & 15u);
  }
};

}  // namespace tiles
