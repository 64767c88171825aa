# Installs the built library to a fresh prefix, configures examples/host_app against it with
# find_package(fsattn), builds it and runs it. Invoked by ctest (install_and_build_example).
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if (NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}")
  endif ()
  message("${out}")
endfunction()
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach (kind shared static)
  run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/host_app -B ${WORK_DIR}/${kind}
      -DCMAKE_PREFIX_PATH=${prefix} -DFSATTN_LINK=${kind})
  run(${CMAKE_COMMAND} --build ${WORK_DIR}/${kind})
  run(${WORK_DIR}/${kind}/ida_host_app)
endforeach ()
