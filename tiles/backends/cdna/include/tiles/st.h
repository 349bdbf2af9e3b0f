// tiles CDNA shared (LDS) tiles: a row-major ROWS x COLS tile of 16-bit elements whose 16-byte chunks
// are XOR-swizzled inside each 128-byte line, so that the MFMA operand reads (ds_read_b128) and the
// stage writes hit distinct banks. The swizzle parameters are chosen per arch by
// layouts.choose_swizzle (the Python bank model) and passed in by the template.
#pragma once
#include "prelude.h"

namespace tiles {

// chunk' = chunk ^ (((line >> S1) ^ (line >> S2)) & MASK), line = byte offset / 128; S2 = 31: unused.
template <int ROWS, int COLS, int S1 = 0, int S2 = 31, int MASK = 0>
struct st {
  static constexpr int rows = ROWS, cols = COLS, elem_bytes = 2;
  static constexpr int row_bytes = COLS * 2;
  static constexpr int bytes = ROWS * row_bytes;
  static_assert(row_bytes % 16 == 0, "LDS tile rows must be a multiple of 16 bytes");
  static_assert(row_bytes >= 128 ? row_bytes % 128 == 0 : 128 % row_bytes == 0, "rows must tile 128-byte lines");
  static_assert(MASK <= 7, "8 chunks per 128-byte line");

  TILES_HD u32 swz(u32 line) { return ((line >> S1) ^ (S2 < 31 ? (line >> S2) : 0u)) & (u32)MASK; }
  // byte offset of element (r, c) inside the tile
  TILES_HD u32 offset(u32 r, u32 c) {
    const u32 lin = r * (u32)row_bytes + c * 2u;
    const u32 line = lin >> 7, chunk = (lin >> 4) & 7u;
    return (line << 7) | ((chunk ^ swz(line)) << 4) | (lin & 15u);
  }
};

}  // namespace tiles
