// The odd shapes every kernel suite checks against the float64 reference, CPU and GPU alike:
// T = 1, T not a multiple of any chunk length (and two chunks plus one token), Dk != Dv,
// tiny D, M != Dk and M > D, B·H = 1, T > 2048; for BLA also S = 1, M = 0, non-integer W,
// S != 2M+1 and a start position far from 0.
#pragma once

#include "reference/bla_reference.h"
#include "reference/ida_reference.h"

#include <cstdint>

namespace fsattn::test {

struct IdaShapeCase {
  const char *what;
  ref::IdaShape s;
};

struct BlaShapeCase {
  const char *what;
  ref::BlaShape s;
  int64_t pos0;
};

inline const IdaShapeCase kIdaForwardShapes[] = {
    {"T1", {1, 1, 1, 8, 8, 4}},       {"odd", {2, 37, 3, 16, 24, 8}},     {"BH1_tiny_dims", {1, 100, 1, 5, 7, 3}},
    {"M_gt_D", {1, 65, 2, 4, 3, 12}}, {"long", {1, 2053, 2, 32, 16, 16}},
};

inline const IdaShapeCase kIdaBackwardShapes[] = {
    {"T1", {1, 1, 1, 8, 8, 4}},
    {"odd", {2, 37, 3, 16, 24, 8}},
    {"BH1_tiny_dims", {1, 100, 1, 5, 7, 3}},
    {"M_gt_D", {1, 65, 2, 4, 3, 12}},
    {"two_chunks_plus_one", {2, 129, 2, 16, 16, 8}},
    {"long", {1, 2053, 2, 32, 16, 16}},
};

inline const BlaShapeCase kBlaForwardShapes[] = {
    {"T1", {1, 1, 1, 8, 8, 3, 7.0, 7}, 0},
    {"odd", {2, 37, 3, 16, 24, 5, 20.5, 8}, 3},
    {"S1", {1, 50, 2, 5, 7, 2, 6.5, 1}, 1},
    {"M0", {2, 45, 1, 6, 3, 0, 9.25, 5}, 0},
    {"BH1_tiny_dims", {1, 100, 1, 3, 2, 4, 13.3, 17}, 11},
    {"S_lt_2M1", {1, 70, 2, 12, 9, 9, 31.0, 6}, 5},
    {"long", {1, 2053, 2, 32, 16, 15, 256.0, 31}, 1 << 20},
};

inline const BlaShapeCase kBlaBackwardShapes[] = {
    {"T1", {1, 1, 1, 8, 8, 3, 7.0, 7}, 0},
    {"odd", {2, 37, 3, 16, 24, 5, 20.5, 8}, 3},
    {"S1", {1, 50, 2, 5, 7, 2, 6.5, 1}, 1},
    {"M0", {2, 45, 1, 6, 3, 0, 9.25, 5}, 0},
    {"BH1_tiny_dims", {1, 100, 1, 3, 2, 4, 13.3, 17}, 11},
    {"S_lt_2M1", {1, 70, 2, 12, 9, 9, 31.0, 6}, 5},
    {"two_chunks_plus_one", {2, 129, 2, 16, 16, 7, 40.0, 15}, 0},
    {"long", {1, 2053, 2, 32, 16, 15, 256.0, 31}, 1 << 20},
};

}  // namespace fsattn::test
