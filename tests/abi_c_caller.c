/* The ABI test's C side: the header and its macros as a C caller compiles them. */
#include <fsattn/fsattn.h>

/* Any int may reach the library as a status from C. */
const char *c_status_string(int status) { return fsattn_status_string((fsattn_status)status); }

/* A BLA step of one token through structs set up by the INIT macros, as in the README. */
fsattn_status c_bla_step(const float *q, const float *k, const float *v, float *state_k, float *state_v, float *o,
                         const float *log_gamma) {
  fsattn_exec exec = FSATTN_EXEC_INIT;
  fsattn_dims dims = FSATTN_DIMS_INIT;
  fsattn_bla_params p = FSATTN_BLA_PARAMS_INIT;
  dims.batch = 1, dims.seqlen = 1, dims.heads = 2, dims.dk = 4, dims.dv = 4;
  p.modes = 1, p.period = 8.0, p.slots = 3, p.pos0 = 5, p.log_gamma = log_gamma;
  return fsattn_bla_step(&exec, &dims, &p, q, k, v, state_k, state_v, o);
}
