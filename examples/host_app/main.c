/* The smallest use of fsattn: one IDA forward call on the CPU, in plain C, with the
   reference initialisation of docs/spec.md §1 and the final state carried to a second call. */
#include <fsattn/fsattn.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { B = 1, T = 64, H = 2, D = 16, M = 8 };

static float uniform(unsigned *seed) { return (float)rand_r(seed) / (float)RAND_MAX * 2.0f - 1.0f; }

int main(void) {
  static float q[B * T * H * D], k[B * T * H * D], v[B * T * H * D], o[B * T * H * D];
  static float gk[H * D], bk[H * D], gv[H * D], bv[H * D], log_dt[H], a_re[H * M], a_im[H * M];
  static float bm[H * M * 2], c[H * M * M * 2], sk[B * H * M * D * 2], sv[B * H * M * D * 2];
  unsigned seed = 1;
  for (int i = 0; i < B * T * H * D; ++i) q[i] = uniform(&seed), k[i] = uniform(&seed), v[i] = uniform(&seed);
  for (int i = 0; i < H * D; ++i) gk[i] = gv[i] = 1.0f, bk[i] = bv[i] = 0.0f;
  for (int h = 0; h < H; ++h) {
    log_dt[h] = logf(0.01f);
    for (int n = 0; n < M; ++n) {
      a_re[h * M + n] = logf(0.5f);
      a_im[h * M + n] = (float)M / 3.14159265f * ((float)M / (2 * n + 1) - 1);
      bm[(h * M + n) * 2] = 1.0f;
      bm[(h * M + n) * 2 + 1] = 0.0f;
    }
  }
  for (int i = 0; i < H * M * M * 2; ++i) c[i] = uniform(&seed) / sqrtf(2.0f * M);

  fsattn_exec exec = FSATTN_EXEC_INIT; /* the CPU, the tuned variant */
  fsattn_dims dims = FSATTN_DIMS_INIT;
  dims.batch = B, dims.seqlen = T, dims.heads = H, dims.dk = D, dims.dv = D;
  fsattn_ida_params p = FSATTN_IDA_PARAMS_INIT; /* eps 0: the default */
  p.modes = M;
  p.gk = gk, p.bk = bk, p.gv = gv, p.bv = bv;
  p.log_dt = log_dt, p.A_re_log = a_re, p.A_im = a_im, p.B = bm, p.C = c;
  fsattn_status st = fsattn_ida_forward(&exec, &dims, &p, q, k, v, NULL, NULL, o, sk, sv);
  if (st != FSATTN_OK) {
    fprintf(stderr, "fsattn_ida_forward: %s: %s\n", fsattn_status_string(st), fsattn_last_error());
    return 1;
  }
  /* Continue from the final state: the next T tokens. */
  st = fsattn_ida_forward(&exec, &dims, &p, q, k, v, sk, sv, o, sk, sv);
  if (st != FSATTN_OK) {
    fprintf(stderr, "second call failed (%d): %s\n", (int)st, fsattn_last_error());
    return 1;
  }
  double norm = 0;
  for (int i = 0; i < B * T * H * D; ++i) norm += (double)o[i] * o[i];
  /* A bad argument is a status and a message, never a crash. */
  st = fsattn_ida_forward(&exec, &dims, &p, NULL, k, v, NULL, NULL, o, NULL, NULL);
  printf("fsattn %s (header %d.%d.%d): ida_forward ok, |o| = %.6f; with q = NULL: %s, \"%s\"\n", fsattn_version(),
         FSATTN_VERSION_MAJOR, FSATTN_VERSION_MINOR, FSATTN_VERSION_PATCH, sqrt(norm), fsattn_status_string(st),
         fsattn_last_error());
  return st == FSATTN_ERROR_INVALID_ARGUMENT && isfinite(norm) && norm > 0 ? 0 : 1;
}
