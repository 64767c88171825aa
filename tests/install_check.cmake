# Installs the built library to a fresh prefix and builds programs against it as users would,
# then runs them. Invoked by ctest (install_and_build_example):
#   - examples/host_app with find_package(fsattn), linked to the shared and the static library;
#   - the same program with pkg-config and the C compiler alone;
#   - a host with its own Halide pipeline and runtime, linked with the static library;
#   - the static library defines no Halide runtime symbol under Halide's names.
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if (NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}")
  endif ()
  message("${out}")
  set(out "${out}" PARENT_SCOPE)
endfunction()
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach (kind shared static)
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/host_app -B ${WORK_DIR}/${kind}
      -DCMAKE_PREFIX_PATH=${prefix} -DFSATTN_LINK=${kind})
  run(${CMAKE_COMMAND} --build ${WORK_DIR}/${kind})
  run(${WORK_DIR}/${kind}/ida_host_app)
endforeach ()

# pkg-config, from the installed fsattn.pc (relative to its own place).
find_program(PKG_CONFIG pkg-config REQUIRED)
find_program(CC NAMES cc gcc REQUIRED)
set(ENV{PKG_CONFIG_PATH} ${prefix}/lib/pkgconfig)
run(${PKG_CONFIG} --cflags --libs fsattn)
separate_arguments(flags UNIX_COMMAND "${out}")
run(${CC} ${SOURCE_DIR}/examples/host_app/main.c ${flags} -lm -Wl,-rpath,${prefix}/lib -o ${WORK_DIR}/pkgconfig_host_app)
run(${WORK_DIR}/pkgconfig_host_app)

run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumers/halide_host -B ${WORK_DIR}/halide_host
    -DCMAKE_PREFIX_PATH=${prefix} -DHalide_DIR=${HALIDE_DIR})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/halide_host)
run(${WORK_DIR}/halide_host/halide_host)
run(${NM} -g --defined-only ${prefix}/lib/libfsattn.a)
if (out MATCHES " [A-Za-z] (halide_[a-z_]+)")
  message(FATAL_ERROR "libfsattn.a defines ${CMAKE_MATCH_1}: a host's Halide runtime would clash with it")
endif ()
