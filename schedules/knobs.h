// Schedule knobs: plain values with defaults, set from GeneratorParams, so that the build can
// compile several variants of one generator and the runtime can choose among them.
#pragma once

namespace fsattn {

struct CpuKnobs {
  int chunk = 32;   // tokens per chunk (L); the intra-chunk work grows with L, the carry does not
  int vector = 0;   // vector width in floats; 0 = the target's natural width
  // Register tiles of the matmul-like stages: tile_vectors vectors along the contiguous
  // dimension times tile_rows values of the other (one accumulator register each).
  int tile_vectors = 2;
  int tile_rows = 4;
};

}  // namespace fsattn
