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

namespace fsattn {

struct CudaKnobs {
  int chunk = 64;     // tokens per chunk (L)
  int threads = 128;  // threads per block of every stage's kernel
  // Register tiles of the reductions (matmul-like stages): each thread accumulates a
  // tile × tile block of outputs over the first two dimensions; 1: one output per thread.
  int tile = 1;
  // The tiles a schedule lists as large (schedules/cuda.cpp): large_tile × large_tile, with
  // the large budget (register_budget.h); 0: none, every tile is tile × tile.
  int large_tile = 0;
  // Decoding steps: 1 = one kernel for the whole step (a block per head and sequence), whose
  // threads' loops over the states are unrolled `unroll` times.
  int fused = 0;
  int unroll = 8;
};

}  // namespace fsattn
