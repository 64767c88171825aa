// fsattn._ext: thin pybind11 bindings of the fsattn C API (runtime/include/fsattn/fsattn.h).
//
// Every tensor is passed as an integer address (torch.Tensor.data_ptr(); 0 means NULL) and
// every shape as integers; a CUDA stream is an integer cudaStream_t (0: the legacy default
// stream). The module does not link PyTorch: the Python layer (fsattn/_common.py) checks
// shapes, dtypes, devices and strides before calling here, and the library validates everything
// else. A failed call raises ValueError (FSATTN_ERROR_INVALID_ARGUMENT) or fsattn.FsattnError,
// a RuntimeError (any other status), with fsattn_last_error()'s message. The GIL is released
// around every library call.
#include <fsattn/fsattn.h>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace py = pybind11;

namespace {

using addr = std::uintptr_t;

template <class T>
T *P(addr a) {
  return reinterpret_cast<T *>(a);
}

PyObject *g_error = nullptr;        // fsattn.FsattnError (RuntimeError)
PyObject *g_unsupported = nullptr;  // fsattn.UnsupportedError (FsattnError, NotImplementedError)

// The message of a failed call: read on the calling thread (fsattn_last_error is per thread),
// before the GIL is taken back.
struct Failure {
  fsattn_status status = FSATTN_OK;
  std::string message;
};

Failure failure(fsattn_status st, const char *fn) {
  Failure f;
  f.status = st;
  if (st != FSATTN_OK) {
    const char *detail = fsattn_last_error();
    f.message = std::string(fn) + ": " + fsattn_status_string(st) + ": " + (detail ? detail : "");
  }
  return f;
}

void raise_if_failed(const Failure &f) {
  if (f.status == FSATTN_OK) return;
  if (f.status == FSATTN_ERROR_INVALID_ARGUMENT) throw py::value_error(f.message);
  PyObject *type = f.status == FSATTN_ERROR_UNSUPPORTED ? g_unsupported : g_error;
  PyErr_SetString(type, f.message.c_str());
  throw py::error_already_set();
}

// Holds the exec struct and the variant string it points to.
struct Exec {
  fsattn_exec e = FSATTN_EXEC_INIT;
  std::string variant;
  Exec(int device, addr stream, const py::object &variant_name) {
    if (device != FSATTN_DEVICE_CPU && device != FSATTN_DEVICE_CUDA)
      throw py::value_error("fsattn: device must be 0 (CPU) or 1 (CUDA)");
    e.device = static_cast<fsattn_device>(device);
    e.stream = P<void>(stream);
    if (!variant_name.is_none()) {
      variant = variant_name.cast<std::string>();
      e.variant = variant.c_str();
    }
  }
};

// The element strides (batch, token, head) of q, k, v, o, d_o, dq, dk and dv, in that order
// (fsattn_layout); zeros: dense.
using Strides = std::array<int64_t, 24>;

// dims with its layout (dims.layout points into this object, which therefore never moves).
struct StridedDims {
  fsattn_dims d;
  fsattn_layout layout = FSATTN_LAYOUT_INIT;
  StridedDims(fsattn_dims dims, const Strides &s) : d(dims) {
    fsattn_strides *t[8] = {&layout.q,   &layout.k,  &layout.v,  &layout.o,
                            &layout.d_o, &layout.dq, &layout.dk, &layout.dv};
    bool any = false;
    for (int i = 0; i < 8; ++i) {
      *t[i] = {s[3 * i], s[3 * i + 1], s[3 * i + 2]};
      any = any || s[3 * i] != 0 || s[3 * i + 1] != 0 || s[3 * i + 2] != 0;
    }
    d.layout = any ? &layout : nullptr;
  }
  StridedDims(const StridedDims &) = delete;
  StridedDims &operator=(const StridedDims &) = delete;
};

fsattn_dims make_dims(int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t Dv, addr cu, int64_t num_seqs) {
  fsattn_dims d = FSATTN_DIMS_INIT;
  d.batch = B;
  d.seqlen = T;
  d.heads = H;
  d.dk = Dk;
  d.dv = Dv;
  d.cu_seqlens = P<const int64_t>(cu);
  d.num_seqs = cu ? num_seqs : 0;
  return d;
}

fsattn_bla_params make_bla(int64_t modes, double period, int64_t slots, double scale, int64_t pos0, addr log_gamma) {
  fsattn_bla_params p = FSATTN_BLA_PARAMS_INIT;
  p.modes = modes;
  p.period = period;
  p.slots = slots;
  p.scale = static_cast<float>(scale);
  p.pos0 = pos0;
  p.log_gamma = P<const float>(log_gamma);
  return p;
}

// IDA parameters in the order of fsattn.IdaParams: gk, bk, gv, bv, log_dt, A_re_log, A_im, B, C.
using IdaPtrs = std::array<addr, 9>;

fsattn_ida_params make_ida(int64_t modes, double eps, const IdaPtrs &a) {
  fsattn_ida_params p = FSATTN_IDA_PARAMS_INIT;
  p.modes = modes;
  p.eps = static_cast<float>(eps);
  p.gk = P<const float>(a[0]);
  p.bk = P<const float>(a[1]);
  p.gv = P<const float>(a[2]);
  p.bv = P<const float>(a[3]);
  p.log_dt = P<const float>(a[4]);
  p.A_re_log = P<const float>(a[5]);
  p.A_im = P<const float>(a[6]);
  p.B = P<const float>(a[7]);
  p.C = P<const float>(a[8]);
  return p;
}

// ---- BLA ---------------------------------------------------------------------------------

void bla_forward(int device, addr stream, const py::object &variant,  //
                 int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t Dv, addr cu, int64_t num_seqs,
                 const Strides &strides,                                                                   //
                 int64_t modes, double period, int64_t slots, double scale, int64_t pos0, addr log_gamma,  //
                 addr q, addr k, addr v, addr sk_in, addr sv_in, addr o, addr sk_out, addr sv_out) {
  Exec ex(device, stream, variant);
  const StridedDims sd(make_dims(B, T, H, Dk, Dv, cu, num_seqs), strides);
  const fsattn_dims &d = sd.d;
  const fsattn_bla_params p = make_bla(modes, period, slots, scale, pos0, log_gamma);
  Failure f;
  {
    py::gil_scoped_release nogil;
    f = failure(fsattn_bla_forward(&ex.e, &d, &p, P<const float>(q), P<const float>(k), P<const float>(v),
                                   P<const float>(sk_in), P<const float>(sv_in), P<float>(o), P<float>(sk_out),
                                   P<float>(sv_out)),
                "fsattn_bla_forward");
  }
  raise_if_failed(f);
}

void bla_backward(int device, addr stream, const py::object &variant,  //
                  int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t Dv, addr cu, int64_t num_seqs,
                  const Strides &strides,                                                                   //
                  int64_t modes, double period, int64_t slots, double scale, int64_t pos0, addr log_gamma,  //
                  addr q, addr k, addr v, addr sk_in, addr sv_in, addr d_o, addr d_sk_out, addr d_sv_out,   //
                  addr dq, addr dk, addr dv, addr d_log_gamma, addr d_sk_in, addr d_sv_in) {
  Exec ex(device, stream, variant);
  const StridedDims sd(make_dims(B, T, H, Dk, Dv, cu, num_seqs), strides);
  const fsattn_dims &d = sd.d;
  const fsattn_bla_params p = make_bla(modes, period, slots, scale, pos0, log_gamma);
  Failure f;
  {
    py::gil_scoped_release nogil;
    f = failure(fsattn_bla_backward(&ex.e, &d, &p, P<const float>(q), P<const float>(k), P<const float>(v),
                                    P<const float>(sk_in), P<const float>(sv_in), P<const float>(d_o),
                                    P<const float>(d_sk_out), P<const float>(d_sv_out), P<float>(dq), P<float>(dk),
                                    P<float>(dv), P<float>(d_log_gamma), P<float>(d_sk_in), P<float>(d_sv_in)),
                "fsattn_bla_backward");
  }
  raise_if_failed(f);
}

void bla_step(int device, addr stream, const py::object &variant,                                      //
              int64_t B, int64_t H, int64_t Dk, int64_t Dv,                                            //
              int64_t modes, double period, int64_t slots, double scale, int64_t pos, addr log_gamma,  //
              addr q, addr k, addr v, addr sk, addr sv, addr o) {
  Exec ex(device, stream, variant);
  const fsattn_dims d = make_dims(B, 1, H, Dk, Dv, 0, 0);
  const fsattn_bla_params p = make_bla(modes, period, slots, scale, pos, log_gamma);
  Failure f;
  {
    py::gil_scoped_release nogil;
    f = failure(fsattn_bla_step(&ex.e, &d, &p, P<const float>(q), P<const float>(k), P<const float>(v), P<float>(sk),
                                P<float>(sv), P<float>(o)),
                "fsattn_bla_step");
  }
  raise_if_failed(f);
}

// The C side of the step-overhead measurement: `iters` fsattn_bla_step calls from a C++ loop
// (CPU), with the same arguments as bla_step and the position advancing by one per call; each
// call is timed alone and, when gap_seconds > 0, followed by that long a busy wait (as a
// caller's own work between steps would). Returns the mean seconds per call.
double time_bla_step(int64_t iters, double gap_seconds, int64_t B, int64_t H, int64_t Dk, int64_t Dv,         //
                     int64_t modes, double period, int64_t slots, double scale, int64_t pos, addr log_gamma,  //
                     addr q, addr k, addr v, addr sk, addr sv, addr o) {
  using clock = std::chrono::steady_clock;
  fsattn_exec e = FSATTN_EXEC_INIT;
  const fsattn_dims d = make_dims(B, 1, H, Dk, Dv, 0, 0);
  fsattn_bla_params p = make_bla(modes, period, slots, scale, pos, log_gamma);
  Failure f;
  double seconds = 0;
  {
    py::gil_scoped_release nogil;
    const auto gap = std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(gap_seconds));
    for (int64_t i = 0; i < iters && f.status == FSATTN_OK; ++i) {
      p.pos0 = pos + i;
      const auto t0 = clock::now();
      f = failure(fsattn_bla_step(&e, &d, &p, P<const float>(q), P<const float>(k), P<const float>(v), P<float>(sk),
                                  P<float>(sv), P<float>(o)),
                  "fsattn_bla_step");
      const auto t1 = clock::now();
      seconds += std::chrono::duration<double>(t1 - t0).count();
      if (gap_seconds > 0)
        while (clock::now() - t1 < gap) {
        }
    }
  }
  raise_if_failed(f);
  return seconds / double(iters > 0 ? iters : 1);
}

void bla_interpolate(int device, addr stream, const py::object &variant,  //
                     int64_t B, int64_t H, int64_t D, int64_t modes, double period, int64_t slots, int64_t position,
                     addr lags, int64_t num_lags, addr state, addr out) {
  Exec ex(device, stream, variant);
  Failure f;
  {
    py::gil_scoped_release nogil;
    f = failure(fsattn_bla_interpolate(&ex.e, B, H, D, modes, period, slots, position, P<const double>(lags), num_lags,
                                       P<const float>(state), P<float>(out)),
                "fsattn_bla_interpolate");
  }
  raise_if_failed(f);
}

// ---- IDA ---------------------------------------------------------------------------------

void ida_forward(int device, addr stream, const py::object &variant,  //
                 int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t Dv, addr cu, int64_t num_seqs,
                 const Strides &strides,                            //
                 int64_t modes, double eps, const IdaPtrs &params,  //
                 addr q, addr k, addr v, addr sk_in, addr sv_in, addr o, addr sk_out, addr sv_out) {
  Exec ex(device, stream, variant);
  const StridedDims sd(make_dims(B, T, H, Dk, Dv, cu, num_seqs), strides);
  const fsattn_dims &d = sd.d;
  const fsattn_ida_params p = make_ida(modes, eps, params);
  Failure f;
  {
    py::gil_scoped_release nogil;
    f = failure(fsattn_ida_forward(&ex.e, &d, &p, P<const float>(q), P<const float>(k), P<const float>(v),
                                   P<const float>(sk_in), P<const float>(sv_in), P<float>(o), P<float>(sk_out),
                                   P<float>(sv_out)),
                "fsattn_ida_forward");
  }
  raise_if_failed(f);
}

// grads: the parameter gradients in the order of IdaParams (each 0: not written).
void ida_backward(int device, addr stream, const py::object &variant,  //
                  int64_t B, int64_t T, int64_t H, int64_t Dk, int64_t Dv, addr cu, int64_t num_seqs,
                  const Strides &strides,                                                                  //
                  int64_t modes, double eps, const IdaPtrs &params,                                        //
                  addr q, addr k, addr v, addr sk_in, addr sv_in, addr d_o, addr d_sk_out, addr d_sv_out,  //
                  addr dq, addr dk, addr dv, const IdaPtrs &grads, addr d_sk_in, addr d_sv_in) {
  Exec ex(device, stream, variant);
  const StridedDims sd(make_dims(B, T, H, Dk, Dv, cu, num_seqs), strides);
  const fsattn_dims &d = sd.d;
  const fsattn_ida_params p = make_ida(modes, eps, params);
  fsattn_ida_grads g = FSATTN_IDA_GRADS_INIT;
  g.gk = P<float>(grads[0]);
  g.bk = P<float>(grads[1]);
  g.gv = P<float>(grads[2]);
  g.bv = P<float>(grads[3]);
  g.log_dt = P<float>(grads[4]);
  g.A_re_log = P<float>(grads[5]);
  g.A_im = P<float>(grads[6]);
  g.B = P<float>(grads[7]);
  g.C = P<float>(grads[8]);
  Failure f;
  {
    py::gil_scoped_release nogil;
    f = failure(fsattn_ida_backward(&ex.e, &d, &p, P<const float>(q), P<const float>(k), P<const float>(v),
                                    P<const float>(sk_in), P<const float>(sv_in), P<const float>(d_o),
                                    P<const float>(d_sk_out), P<const float>(d_sv_out), P<float>(dq), P<float>(dk),
                                    P<float>(dv), &g, P<float>(d_sk_in), P<float>(d_sv_in)),
                "fsattn_ida_backward");
  }
  raise_if_failed(f);
}

void ida_step(int device, addr stream, const py::object &variant,                                              //
              int64_t B, int64_t H, int64_t Dk, int64_t Dv, int64_t modes, double eps, const IdaPtrs &params,  //
              addr q, addr k, addr v, addr sk, addr sv, addr o) {
  Exec ex(device, stream, variant);
  const fsattn_dims d = make_dims(B, 1, H, Dk, Dv, 0, 0);
  const fsattn_ida_params p = make_ida(modes, eps, params);
  Failure f;
  {
    py::gil_scoped_release nogil;
    f = failure(fsattn_ida_step(&ex.e, &d, &p, P<const float>(q), P<const float>(k), P<const float>(v), P<float>(sk),
                                P<float>(sv), P<float>(o)),
                "fsattn_ida_step");
  }
  raise_if_failed(f);
}

// ---- information -------------------------------------------------------------------------

py::object str_or_none(const char *s) { return s ? py::object(py::str(s)) : py::object(py::none()); }

std::vector<std::string> variant_names(int op, int device) {
  std::vector<std::string> names;
  const int n = fsattn_variant_count(static_cast<fsattn_op>(op), static_cast<fsattn_device>(device));
  for (int i = 0; i < n; ++i) {
    const char *name = fsattn_variant_name(static_cast<fsattn_op>(op), static_cast<fsattn_device>(device), i);
    if (name) names.emplace_back(name);
  }
  return names;
}

void load_tuning(const py::object &path) {
  std::string p;
  if (!path.is_none()) p = py::str(path).cast<std::string>();
  raise_if_failed(failure(fsattn_load_tuning(path.is_none() ? nullptr : p.c_str()), "fsattn_load_tuning"));
}

}  // namespace

PYBIND11_MODULE(_ext, m) {
  m.doc() = "Thin bindings of the fsattn C API (integer data pointers; see fsattn/ops.py)";
  g_error = PyErr_NewException("fsattn._ext.FsattnError", PyExc_RuntimeError, nullptr);
  if (!g_error) throw py::error_already_set();
  m.add_object("FsattnError", py::handle(g_error));
  // UnsupportedError derives from FsattnError and NotImplementedError.
  py::tuple bases = py::make_tuple(py::handle(g_error), py::handle(PyExc_NotImplementedError));
  g_unsupported = PyErr_NewException("fsattn._ext.UnsupportedError", bases.ptr(), nullptr);
  if (!g_unsupported) throw py::error_already_set();
  m.add_object("UnsupportedError", py::handle(g_unsupported));

  m.attr("HEADER_VERSION") = py::make_tuple(FSATTN_VERSION_MAJOR, FSATTN_VERSION_MINOR, FSATTN_VERSION_PATCH);
  m.attr("MAX_FEATURE") = FSATTN_MAX_FEATURE;
  m.attr("MAX_HEADS") = FSATTN_MAX_HEADS;
  m.attr("BLA_MIN_PERIOD") = FSATTN_BLA_MIN_PERIOD;
  m.attr("OP_IDA_FORWARD") = int(FSATTN_OP_IDA_FORWARD);
  m.attr("OP_IDA_BACKWARD") = int(FSATTN_OP_IDA_BACKWARD);
  m.attr("OP_BLA_FORWARD") = int(FSATTN_OP_BLA_FORWARD);
  m.attr("OP_BLA_BACKWARD") = int(FSATTN_OP_BLA_BACKWARD);
  m.attr("OP_BLA_INTERPOLATE") = int(FSATTN_OP_BLA_INTERPOLATE);
  m.attr("OP_IDA_STEP") = int(FSATTN_OP_IDA_STEP);
  m.attr("OP_BLA_STEP") = int(FSATTN_OP_BLA_STEP);

  m.def("bla_forward", &bla_forward);
  m.def("bla_backward", &bla_backward);
  m.def("bla_step", &bla_step);
  m.def("bla_interpolate", &bla_interpolate);
  m.def("ida_forward", &ida_forward);
  m.def("ida_backward", &ida_backward);
  m.def("ida_step", &ida_step);
  m.def("time_bla_step", &time_bla_step);

  m.def("version", [] { return std::string(fsattn_version()); });
  m.def("status_string", [](int st) { return std::string(fsattn_status_string(static_cast<fsattn_status>(st))); });
  m.def("last_error", [] { return std::string(fsattn_last_error()); });
  m.def("release_workspace", [] {
    py::gil_scoped_release nogil;
    fsattn_release_workspace();
  });
  m.def("set_workspace_limit", [](std::size_t bytes) { fsattn_set_workspace_limit(bytes); });
  m.def("load_tuning", &load_tuning);
  m.def("tuning_info", [] { return str_or_none(fsattn_tuning_info()); });
  m.def("device_name", [](int device) { return str_or_none(fsattn_device_name(static_cast<fsattn_device>(device))); });
  m.def("op_name", [](int op) { return str_or_none(fsattn_op_name(static_cast<fsattn_op>(op))); });
  m.def("variant_names", &variant_names);
}
