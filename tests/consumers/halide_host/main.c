/* A host's Halide pipeline and fsattn in one program: both give their results, and a refused
   fsattn call still comes back as fsattn's status and message. Built without the pipeline
   (FSATTN_CONSUMER_ONLY), it is the FetchContent consumer's program. */
#include <fsattn/fsattn.h>
#ifndef FSATTN_CONSUMER_ONLY
#include <HalideRuntime.h>
#include "scale_by_two.h"
#endif

#include <stdio.h>
#include <string.h>

int main(void) {
#ifndef FSATTN_CONSUMER_ONLY
  float in[8], out[8];
  for (int i = 0; i < 8; ++i) in[i] = (float)i;
  halide_buffer_t bin, bout;
  halide_dimension_t dim = {0, 8, 1, 0};
  memset(&bin, 0, sizeof bin);
  bin.host = (uint8_t *)in, bin.type.code = halide_type_float, bin.type.bits = 32, bin.type.lanes = 1;
  bin.dimensions = 1, bin.dim = &dim;
  bout = bin;
  bout.host = (uint8_t *)out;
  if (scale_by_two(&bin, &bout) != 0 || out[7] != 14.0f) {
    fprintf(stderr, "the host's pipeline failed\n");
    return 1;
  }
#endif

  enum { H = 2, D = 4, S = 3 };
  float q[H * D], k[H * D], v[H * D], o[H * D], sk[H * S * D] = {0}, sv[H * S * D] = {0}, log_gamma[H] = {0, 0};
  for (int i = 0; i < H * D; ++i) q[i] = k[i] = v[i] = 0.25f * (float)(i % 5);
  fsattn_exec exec = FSATTN_EXEC_INIT;
  fsattn_dims dims = FSATTN_DIMS_INIT;
  dims.batch = 1, dims.seqlen = 1, dims.heads = H, dims.dk = D, dims.dv = D;
  fsattn_bla_params p = FSATTN_BLA_PARAMS_INIT;
  p.modes = 1, p.period = 8.0, p.slots = S, p.log_gamma = log_gamma;
  fsattn_status st = fsattn_bla_step(&exec, &dims, &p, q, k, v, sk, sv, o);
  if (st != FSATTN_OK) {
    fprintf(stderr, "fsattn_bla_step: %s: %s\n", fsattn_status_string(st), fsattn_last_error());
    return 1;
  }
  /* A refused call comes back as a status with fsattn's message. */
  st = fsattn_bla_step(&exec, &dims, &p, NULL, k, v, sk, sv, o);
  if (st != FSATTN_ERROR_INVALID_ARGUMENT || strstr(fsattn_last_error(), "q") == NULL) {
    fprintf(stderr, "a NULL q gave %s: %s\n", fsattn_status_string(st), fsattn_last_error());
    return 1;
  }
  printf("fsattn %s: bla_step ok (o[1] = %.6f)\n", fsattn_version(), o[1]);
  return 0;
}
