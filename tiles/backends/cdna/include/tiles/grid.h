// tiles CDNA tile order: which output tile a workgroup computes.
// MI300X / MI355X dispatch workgroup ids round-robin over 8 XCDs (id % 8), and each XCD has its own L2.
// chiplet_remap gives consecutive logical tile ids to the same XCD (in chunks), then grouped_tile walks
// the output in windows of `group_m` tile rows so neighbours share A rows and B columns in that L2.
// Pure integer math (host + device): schedule.py implements the same functions and the tests compare.
#pragma once
#include "prelude.h"

namespace tiles {

// the IR's scalar helpers (lowering.py spells min/max/cdiv with these)
TILES_HD int imin(int a, int b) { return a < b ? a : b; }
TILES_HD int imax(int a, int b) { return a > b ? a : b; }
TILES_HD int cdiv(int a, int b) { return b ? (a + b - 1) / b : 0; }

// hardware id -> logical id. Ids past the last full block of (num_xcds * chunk) keep their order.
TILES_HD int chiplet_remap(int wg, int num_wg, int num_xcds, int chunk) {
  const int block = num_xcds * chunk;
  const int limit = (num_wg / block) * block;
  if (num_xcds <= 1 || wg >= limit) return wg;
  const int xcd = wg % num_xcds, local = wg / num_xcds;
  return (local / chunk) * block + xcd * chunk + local % chunk;
}

struct tile_rc {
  int m, n;
};
// logical id -> (tile row, tile col) in windows of group_m tile rows, column-major inside a window
TILES_HD tile_rc grouped_tile(int id, int tiles_m, int tiles_n, int group_m) {
  const int per_group = group_m * tiles_n;
  const int group = id / per_group, first_m = group * group_m;
  const int rows = tiles_m - first_m < group_m ? tiles_m - first_m : group_m;
  const int in = id % per_group;
  return tile_rc{first_m + in % rows, in / rows};
}

}  // namespace tiles
