/* fsattn: ahead-of-time compiled Halide kernels for two fixed-state attention token mixers,
 * Interdomain Attention (IDA) and Blurry Window Attention (BLA). The math and this API's
 * contract: docs/spec.md.
 *
 * C ABI, stable within a major version (FSATTN_VERSION_MAJOR). Names and argument orders do
 * not change. Every struct the caller fills starts with `struct_size`, which the caller sets
 * to the struct's size as its header declares it: initialise each one with its
 * FSATTN_*_INIT macro, then set the fields. The library reads only the bytes struct_size
 * covers, so a caller built against an older header keeps working; fields are only ever
 * added at the end, each 8 bytes wide, and a zero value of an added field keeps the older
 * behaviour (fsattn_dims gained `layout` in 1.1; planned: an element type). A
 * struct_size of 0 (an uninitialised struct) or below this release's size is
 * FSATTN_ERROR_INVALID_ARGUMENT; one above the size this library knows is accepted only if
 * every byte the library does not know is zero, else FSATTN_ERROR_UNSUPPORTED (the caller set
 * a field that this older library cannot honour).
 *
 * Layouts. Activations are row-major [B, T, H, D] (D contiguous). Complex tensors carry a
 * trailing dimension of 2 holding (re, im). Every pointer is caller-owned memory on the device
 * named in `exec` (host memory for the CPU), dense in the documented layout unless
 * dims->layout gives the activations' strides. Outputs and gradients are overwritten, never
 * accumulated.
 *
 * Sizes. batch, seqlen, heads >= 1; dk, dv, modes (IDA: >= 1; BLA: >= 0) and slots (>= 1) up
 * to FSATTN_MAX_FEATURE; heads up to FSATTN_MAX_HEADS; batch and seqlen up to INT32_MAX; every
 * tensor's element count must fit in int64 and its bytes in the address space.
 *
 * Errors. Every function returns a status and never aborts or prints; on failure
 * fsattn_last_error() gives this thread's message. Arguments are validated before any kernel
 * runs: on FSATTN_ERROR_INVALID_ARGUMENT or FSATTN_ERROR_UNSUPPORTED nothing was written.
 *
 * CUDA (exec->device = FSATTN_DEVICE_CUDA). Kernels run on exec->stream (NULL: the legacy
 * default stream) in the CUDA context current on the calling thread, else in device 0's
 * primary context (the one the CUDA runtime API and PyTorch use); a stream of another
 * context is FSATTN_ERROR_INVALID_ARGUMENT. Every pointer, parameters
 * included, is device memory (cudaMalloc, a PyTorch CUDA tensor's data_ptr()); each is checked
 * to be CUDA memory that covers its shape (else FSATTN_ERROR_INVALID_ARGUMENT). Calls are
 * asynchronous: FSATTN_OK means the work is queued on the stream, and a fault inside a kernel
 * surfaces at the caller's next synchronising CUDA call. The host never reads device memory,
 * so BLA's log_gamma values are not checked there: a value > 0 (or -inf) makes that head's
 * outputs NaN. Kernel intermediates are device buffers that the library keeps for reuse on
 * the stream that used them (fsattn_release_workspace frees them). Final states and
 * initial-state gradients may be written in place over their inputs; if a CUDA call fails,
 * its outputs are filled with NaN (states written in place included). dims->cu_seqlens is
 * host memory also on CUDA (the host splits the call into one launch per sequence; the
 * parameter gradients are summed on the stream, in float, in sequence order). Not served on
 * CUDA yet (FSATTN_ERROR_UNSUPPORTED): fsattn_bla_interpolate. Without an NVIDIA driver or
 * GPU a CUDA call returns FSATTN_ERROR_DEVICE.
 */
#ifndef FSATTN_FSATTN_H
#define FSATTN_FSATTN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FSATTN_VERSION_MAJOR 1
#define FSATTN_VERSION_MINOR 1
#define FSATTN_VERSION_PATCH 0

#define FSATTN_MAX_FEATURE 256     /* largest dk, dv, modes, slots */
#define FSATTN_MAX_HEADS 65536     /* largest heads */
#define FSATTN_BLA_MIN_PERIOD 1e-6 /* smallest BLA period W, in tokens */

typedef enum {
  FSATTN_OK = 0,
  FSATTN_ERROR_INVALID_ARGUMENT = 1, /* null pointer, bad size, inconsistent shape, ... */
  FSATTN_ERROR_UNSUPPORTED = 2,      /* valid request this build or device cannot serve */
  FSATTN_ERROR_DEVICE = 3,           /* CUDA/driver failure, no CUDA device            */
  FSATTN_ERROR_OUT_OF_MEMORY = 4,
  FSATTN_ERROR_INTERNAL = 5
} fsattn_status;

typedef enum { FSATTN_DEVICE_CPU = 0, FSATTN_DEVICE_CUDA = 1 } fsattn_device;

typedef struct {
  size_t struct_size; /* sizeof(fsattn_exec): FSATTN_EXEC_INIT */
  fsattn_device device;
  void *stream;        /* CUDA: the caller's cudaStream_t / CUstream (NULL: default stream) */
  const char *variant; /* NULL: the variant the tuning table picks for the call's shape
                          (see "tuning" below). Else the name of a compiled variant of the
                          called kernel (see fsattn_variant_name); an unknown name is
                          FSATTN_ERROR_INVALID_ARGUMENT. */
} fsattn_exec;
#define FSATTN_EXEC_INIT \
  { sizeof(fsattn_exec), FSATTN_DEVICE_CPU, NULL, NULL }

/* Element strides of one activation [B, T, H, D] (D contiguous): how many elements apart
   consecutive batch entries, tokens and heads lie. A stride of 0 takes its dense value
   (head D, token H·D, batch T·H·D), so an all-zero member is a dense tensor. */
typedef struct {
  int64_t batch, token, head;
} fsattn_strides;

/* The activations' layouts (dims->layout; NULL: all dense), e.g. q, k and v as slices of a
   fused projection [B, T, 3, H, D] (strides {T·3·H·D, 3·H·D, D}, pointers H·D apart) or a
   head-major [B, H, T, D] buffer ({H·T·D, D, T·D}). The steps ignore the token strides.
   Strides are >= 0; token and head strides at most INT32_MAX. An output's elements must not
   share memory with each other or with any other activation of the call: an output may
   interleave with another activation only when both have the same strides (slices of one
   buffer), else their address ranges must not meet (else FSATTN_ERROR_INVALID_ARGUMENT). */
typedef struct {
  size_t struct_size; /* sizeof(fsattn_layout): FSATTN_LAYOUT_INIT */
  fsattn_strides q, k, v, o;
  fsattn_strides d_o, dq, dk, dv; /* the backward passes' */
} fsattn_layout;
#define FSATTN_LAYOUT_INIT                                                                                          \
  {                                                                                                                 \
    sizeof(fsattn_layout), {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, { 0, 0, 0 } \
  }

typedef struct {
  size_t struct_size; /* sizeof(fsattn_dims): FSATTN_DIMS_INIT */
  int64_t batch, seqlen, heads, dk, dv;
  const int64_t *cu_seqlens; /* NULL: dense batch. Else batch == 1 and this holds
                                num_seqs + 1 offsets into the seqlen axis; states are per sequence */
  int64_t num_seqs;
  const fsattn_layout *layout; /* since 1.1. NULL: every activation dense */
} fsattn_dims;
#define FSATTN_DIMS_INIT \
  { sizeof(fsattn_dims), 0, 0, 0, 0, 0, NULL, 0, NULL }

typedef struct {
  size_t struct_size;             /* sizeof(fsattn_ida_params): FSATTN_IDA_PARAMS_INIT */
  int64_t modes;                  /* M */
  float eps;                      /* <= 0 means 1e-6 */
  const float *gk, *bk, *gv, *bv; /* [H,Dk] [H,Dk] [H,Dv] [H,Dv] */
  const float *log_dt;            /* [H] */
  const float *A_re_log, *A_im;   /* [H,M] [H,M] */
  const float *B;                 /* [H,M,2] */
  const float *C;                 /* [H,M,M,2] */
} fsattn_ida_params;
#define FSATTN_IDA_PARAMS_INIT \
  { sizeof(fsattn_ida_params), 0, 0.0f, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL }

typedef struct {      /* gradients, same shapes as the parameters, summed
                         over the batch and the tokens; a NULL member (or a
                         NULL fsattn_ida_grads pointer) is not written */
  size_t struct_size; /* sizeof(fsattn_ida_grads): FSATTN_IDA_GRADS_INIT */
  float *gk, *bk, *gv, *bv, *log_dt, *A_re_log, *A_im, *B, *C;
} fsattn_ida_grads;
#define FSATTN_IDA_GRADS_INIT \
  { sizeof(fsattn_ida_grads), NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL }

/* BLA positions are exact up to 2^53: the kernel reduces pos0 modulo W in double on the
   host, then forms each token's phase from it (pos0 + seqlen must not exceed 2^53). */
typedef struct {
  size_t struct_size;     /* sizeof(fsattn_bla_params): FSATTN_BLA_PARAMS_INIT */
  int64_t modes;          /* M >= 0 */
  double period;          /* W >= FSATTN_BLA_MIN_PERIOD, any real */
  int64_t slots;          /* S >= 1 */
  float scale;            /* <= 0 means Dk^-1/2 */
  int64_t pos0;           /* absolute position of the first token (>= 0) */
  const float *log_gamma; /* [H], each <= 0 */
} fsattn_bla_params;
#define FSATTN_BLA_PARAMS_INIT \
  { sizeof(fsattn_bla_params), 0, 0.0, 0, 0.0f, 0, NULL }

/* Variable-length batches: with dims->cu_seqlens, batch is 1 and the num_seqs sequences are
   concatenated along seqlen, sequence s holding tokens [cu_seqlens[s], cu_seqlens[s+1]);
   cu_seqlens[0] = 0, it never decreases (empty sequences are allowed: their final state is
   their initial state) and cu_seqlens[num_seqs] = seqlen. Each sequence has its own states,
   and for BLA starts at position pos0. The forward and backward passes take them (not the
   steps); parameter gradients sum over every sequence.

   IDA states: state_k [B,H,M,Dk,2], state_v [B,H,M,Dv,2].  BLA states: state_k [B,H,S,Dk],
   state_v [B,H,S,Dv].  (With cu_seqlens, B is num_seqs.)  Every state pointer may be NULL:
   a NULL initial state is zero; a NULL final state (or state gradient) is not written/read. */

fsattn_status fsattn_ida_forward(const fsattn_exec *exec, const fsattn_dims *dims, const fsattn_ida_params *p,
                                 const float *q, const float *k, const float *v, const float *state_k_in,
                                 const float *state_v_in, float *o, float *state_k_out, float *state_v_out);

/* Backward passes. Given d_o (and, optionally, the gradients of the final states), they
   return the gradients of L = <d_o, o> + <d_state_k_out, state_k_out> + <d_state_v_out,
   state_v_out> with respect to q, k, v, the parameters (BLA: log_gamma, summed over the batch)
   and the initial states (NULL: not written). A complex value's gradient is (∂L/∂re,
   ∂L/∂im). They recompute the forward chunk by chunk and keep only chunk-boundary states
   (4 scans × B·H·(T/L + 1)·(S or 2M)·D floats, L the variant's chunk length) and per-token
   intermediates of O(B·T·H·(S or M)) floats, never per-token states. Results are bitwise
   reproducible: every reduction runs in a fixed order. An initial-state gradient may be
   written over its final-state gradient (in place); other gradients must not overlap the
   inputs. */
fsattn_status fsattn_ida_backward(const fsattn_exec *exec, const fsattn_dims *dims, const fsattn_ida_params *p,
                                  const float *q, const float *k, const float *v, const float *state_k_in,
                                  const float *state_v_in, const float *d_o, const float *d_state_k_out,
                                  const float *d_state_v_out, float *dq, float *dk, float *dv,
                                  const fsattn_ida_grads *dp, float *d_state_k_in, float *d_state_v_in);

fsattn_status fsattn_bla_forward(const fsattn_exec *exec, const fsattn_dims *dims, const fsattn_bla_params *p,
                                 const float *q, const float *k, const float *v, const float *state_k_in,
                                 const float *state_v_in, float *o, float *state_k_out, float *state_v_out);

fsattn_status fsattn_bla_backward(const fsattn_exec *exec, const fsattn_dims *dims, const fsattn_bla_params *p,
                                  const float *q, const float *k, const float *v, const float *state_k_in,
                                  const float *state_v_in, const float *d_o, const float *d_state_k_out,
                                  const float *d_state_v_out, float *dq, float *dk, float *dv, float *d_log_gamma,
                                  float *d_state_k_in, float *d_state_v_in);

/* One decoding step (dims->seqlen == 1): updates the states in place and writes o, as
   the forward pass does for one token. BLA uses p->pos0 as the token's position. Both state
   pointers are required (a state starts at zero: the caller zeroes it); on CUDA the IDA
   states must be 8-byte aligned (each complex element is loaded as one 8-byte vector).
   Per head the IDA step costs O(M (Dk + Dv) + M^2), the BLA step O(S (Dk + Dv)). */
fsattn_status fsattn_ida_step(const fsattn_exec *exec, const fsattn_dims *dims, const fsattn_ida_params *p,
                              const float *q, const float *k, const float *v, float *state_k, float *state_v, float *o);
fsattn_status fsattn_bla_step(const fsattn_exec *exec, const fsattn_dims *dims, const fsattn_bla_params *p,
                              const float *q, const float *k, const float *v, float *state_k, float *state_v, float *o);

/* The blurry window held by a BLA slot state (docs/spec.md §2): reconstructs the key (or value)
   history by Dirichlet interpolation of the S slots,
       out[b,h,n,:] = (1/S) Σ_j D_M(a_j − (position − lags[n])) state[b,h,j,:],
   with a_j = j·W/S, D_M(x) = 1 + 2 Σ_{m=1..M} cos(2π m x / W). `position` is the absolute
   position of the newest token written into the state (pos0 + seqlen − 1 of the forward call
   that returned it); lag 0 is that token and lags may be fractional. When S >= 2M+1 this is
   exact trigonometric interpolation: the result at lag ℓ is Σ_τ γ^(t−τ) D_M(t−ℓ−τ)/W k_τ,
   a low-pass copy of the keys around token t−ℓ (tokens a period W apart alias). With fewer
   slots the slots under-sample the window and the result is that of the formula above.
   state [batch,heads,slots,dim], lags [num_lags] (finite, |lag| <= 2^53),
   out [batch,heads,num_lags,dim]. */
fsattn_status fsattn_bla_interpolate(const fsattn_exec *exec, int64_t batch, int64_t heads, int64_t dim, int64_t modes,
                                     double period, int64_t slots, int64_t position, const double *lags,
                                     int64_t num_lags, const float *state, float *out);

const char *fsattn_last_error(void); /* this thread's message for its last failed call */
/* A short description of a status ("ok", "invalid argument", ...); never NULL. */
const char *fsattn_status_string(fsattn_status status);
/* The library's version, "MAJOR.MINOR.PATCH": the one it was built as, which may be newer
   than the FSATTN_VERSION_* of the header a caller was compiled with. */
const char *fsattn_version(void);

/* CPU kernels allocate their intermediates per call (IDA forward at B=2, T=2048, H=4,
   Dk=Dv=M=64: about 90 MB). Freed blocks of 64 KiB and more are kept for reuse by later
   calls, up to 4 GiB in all; smaller ones by the thread that freed them, up to 4 MiB per
   thread, returned to the system when the thread exits. This returns the shared blocks and
   the calling thread's small ones. Safe to call at any time, from any thread. */
void fsattn_release_workspace(void);

/* Caps the bytes the CPU workspace may hold (in use plus cached), for all threads together;
   0 (the default) means no cap. A call that would need more fails with
   FSATTN_ERROR_OUT_OF_MEMORY, as when the system runs out. While a cap is set, small blocks
   are counted and not kept; those other threads kept before (at most 4 MiB each) stay
   outside the cap.

   After a failure past validation (FSATTN_ERROR_OUT_OF_MEMORY, FSATTN_ERROR_INTERNAL) every
   output of the call is filled with NaN, never left half-written; a final state that was
   written in place over its initial state is restored to the initial values instead. */
void fsattn_set_workspace_limit(size_t bytes);

/* ---- schedule variants -------------------------------------------------------------------
 * Each kernel is compiled in several schedule variants (chunk length, autoscheduled
 * baselines, ...). They compute the same function; exec->variant picks one by name.
 * Variants named after an autoscheduler (adams2019, mullapudi2016, li2018, anderson2021) are
 * benchmark baselines, built for the benchmark's sizes only (heads = 4, dk = dv = 64; IDA
 * modes = 64; BLA slots = 64): a call with other sizes is refused with
 * FSATTN_ERROR_UNSUPPORTED, as is a CPU baseline on a CPU that lacks the build machine's
 * features. The hand-scheduled variants serve every valid shape. */
typedef enum {
  FSATTN_OP_IDA_FORWARD = 0,
  FSATTN_OP_IDA_BACKWARD = 1,
  FSATTN_OP_BLA_FORWARD = 2,
  FSATTN_OP_BLA_BACKWARD = 3,
  FSATTN_OP_BLA_INTERPOLATE = 4,
  FSATTN_OP_IDA_STEP = 5,
  FSATTN_OP_BLA_STEP = 6
} fsattn_op;

/* The op's name as tuning files and benchmarks write it ("ida_forward", ...), or NULL. */
const char *fsattn_op_name(fsattn_op op);
/* Number of compiled variants of `op` for `device` (0 if none). */
int fsattn_variant_count(fsattn_op op, fsattn_device device);
/* Name of variant `index`, or NULL when out of range. Variant 0 runs where the tuning table
   (below) has no entry for the op and device. */
const char *fsattn_variant_name(fsattn_op op, fsattn_device device, int index);

/* ---- tuning ------------------------------------------------------------------------------
 * With exec->variant NULL, a call runs the variant a tuning table names for its op, device
 * and shape; where the table has no entry for the op and device, variant 0. A table lists
 * measured shapes (batch, seqlen, heads, dk, dv, and modes or slots: the "features") with
 * the fastest variant at each; a call takes the entry nearest its shape, the distance being
 * the sum of |log2| of the ratios of batch·heads, seqlen, dk, dv and features (the first
 * entry of equal distance wins). A variable-length call picks per sequence.
 *
 * The table in use is the built-in one (measured on an NVIDIA H200 and its host CPU: see
 * docs/tuning.md), or a file that fsattn-tune wrote on this machine: set FSATTN_TUNING to its path
 * before the first call, or call fsattn_load_tuning. A file is rejected, and the built-in
 * table used, when it does not parse, was written by an fsattn of another major or minor
 * version (a later patch release reads it), names a variant this build lacks, or was measured on another CPU model or
 * GPU than this machine's. Every variant computes the same function; results are bitwise reproducible for a given
 * variant. */

/* Replaces the table with the file at `path` (NULL: the built-in table). On failure returns
   FSATTN_ERROR_INVALID_ARGUMENT with the reason, and the built-in table is used. Safe to call
   from any thread; calls already running keep the variant they chose. */
fsattn_status fsattn_load_tuning(const char *path);
/* Which table is in use, e.g. "built-in table, 24 entries, measured on NVIDIA H200 (compute
   capability 9.0)"; when a file was rejected (FSATTN_TUNING's included), why. */
const char *fsattn_tuning_info(void);
/* The variant a dense call with this exec, dims and features (IDA modes, BLA slots) would run,
   or NULL (with the reason in fsattn_last_error) when the call would be refused for them. */
const char *fsattn_selected_variant(const fsattn_exec *exec, fsattn_op op, const fsattn_dims *dims, int64_t features);
/* The device as tuning files name it: this CPU's model, or the GPU that CUDA calls on this
   thread would use (the current context's device, else device 0) with its compute capability,
   e.g. "NVIDIA H200 (compute capability 9.0)". NULL when there is none (FSATTN_ERROR_DEVICE). */
const char *fsattn_device_name(fsattn_device device);

#ifdef __cplusplus
}
#endif

#endif /* FSATTN_FSATTN_H */
