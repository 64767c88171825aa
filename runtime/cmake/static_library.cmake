# Makes the static libfsattn's single object (cmake -P, from runtime/CMakeLists.txt): links
# every object of ARCHIVE into one (ld -r), then renames the symbols of the Halide runtime
# inside (halide_*, Halide::Runtime, ...) to fsattn_halide_*, so that a host linking its own
# Halide pipelines, with their own runtime, gets no clash and each side keeps its runtime.
# Renaming, not hiding: the runtime's inline functions are COMDAT groups named by their
# symbols, which the final link would merge with a host's groups of the same names.
foreach (var ARCHIVE OUTPUT LINKER NM OBJCOPY)
  if (NOT DEFINED ${var})
    message(FATAL_ERROR "static_library.cmake: ${var} is not set")
  endif ()
endforeach ()
get_filename_component(dir ${OUTPUT} DIRECTORY)
set(linked ${dir}/fsattn_linked.o)
set(map ${dir}/fsattn_halide_names.txt)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if (NOT rc EQUAL 0)
    message(FATAL_ERROR "${ARGN}: ${rc}\n${err}")
  endif ()
  set(out "${out}" PARENT_SCOPE)
endfunction()

run(${LINKER} -r --whole-archive ${ARCHIVE} -o ${linked})
# The names the Halide runtime's object defines, from "archive:member: address type name"
# lines (GNU nm writes no space after the member's colon, llvm-nm one).
run(${NM} -A --defined-only -g ${ARCHIVE})
string(REPLACE "\n" ";" lines "${out}")
set(names "")
foreach (line IN LISTS lines)
  if (line MATCHES "\\.runtime\\.o: ?[0-9a-fA-F]* [A-Za-z] ([^ ]+)$")
    list(APPEND names "${CMAKE_MATCH_1} fsattn_halide_${CMAKE_MATCH_1}")
  endif ()
endforeach ()
list(LENGTH names count)
if (count LESS 100)
  message(FATAL_ERROR "static_library.cmake: found ${count} Halide runtime symbols in ${ARCHIVE}; expected hundreds")
endif ()
list(JOIN names "\n" text)
file(WRITE ${map} "${text}\n")
run(${OBJCOPY} --redefine-syms=${map} ${linked} ${OUTPUT})
file(REMOVE ${linked})
