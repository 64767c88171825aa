// The schedule knobs of schedules/knobs.def as GeneratorParams: `knob=value` on the
// generator's command line (fsattn_variant in generators/CMakeLists.txt). A generator
// inherits this next to Halide::Generator<T> (Halide finds GeneratorParams anywhere inside the
// generator object) and takes the Knobs of its scope; a knob of another scope set away from
// its default fails the generator, so a variant cannot be named after a knob that does nothing.
#pragma once

#include "Halide.h"
#include "schedules/knobs.h"

#include <string>

namespace fsattn {

enum class KnobScope { ALL, SCAN, STEP };

class KnobParams {
 public:
  // chunk_default: the generator's own chunk length (knobs.def).
  explicit KnobParams(int chunk_default = Knobs{}.chunk) : chunk_default_(chunk_default) { chunk.set(chunk_default); }

 private:
  int chunk_default_;

 public:
#define FSATTN_KNOB(name, tag, default_value, scope, kind, meaning) \
  Halide::GeneratorParam<int> name{#name, default_value};
#include "schedules/knobs.def"
#undef FSATTN_KNOB

  // The knobs as set, `vector` 0 resolved to the target's natural width.
  Knobs knobs(const Halide::Target &target, KnobScope generator_scope) const {
    Knobs k;
    auto take = [&](int &field, const Halide::GeneratorParam<int> &param, KnobScope scope, int default_value) {
      if (scope != KnobScope::ALL && scope != generator_scope && param != default_value) {
        throw Halide::CompileError("knob " + param.name() + " is not one of this generator's (schedules/knobs.def)");
      }
      field = param;
    };
#define FSATTN_KNOB(name, tag, default_value, scope, kind, meaning) \
  take(k.name, name, KnobScope::scope, std::string(#name) == "chunk" ? chunk_default_ : default_value);
#include "schedules/knobs.def"
#undef FSATTN_KNOB
    if (k.vector <= 0) k.vector = target.natural_vector_size<float>();
    return k;
  }
};

}  // namespace fsattn
