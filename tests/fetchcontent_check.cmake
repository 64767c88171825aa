# Builds tests/consumers/fetchcontent, which takes fsattn with FetchContent from this source
# tree's git repository at its current commit, and runs its program. Invoked by ctest
# (fetchcontent_consumer); skipped where the source tree is not a git clone.
file(REMOVE_RECURSE ${WORK_DIR})
execute_process(COMMAND git -C ${SOURCE_DIR} rev-parse HEAD RESULT_VARIABLE rc OUTPUT_VARIABLE tag
                OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if (NOT rc EQUAL 0)
  message("skipped: ${SOURCE_DIR} is not a git clone, nothing to fetch")
  return()
endif ()
foreach (step configure build run)
  if (step STREQUAL "configure")
    set(cmd ${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/consumers/fetchcontent -B ${WORK_DIR} -G Ninja
            -DFSATTN_SOURCE=${SOURCE_DIR} -DFSATTN_TAG=${tag} -DHalide_DIR=${HALIDE_DIR})
  elseif (step STREQUAL "build")
    set(cmd ${CMAKE_COMMAND} --build ${WORK_DIR})
  else ()
    set(cmd ${WORK_DIR}/consumer)
  endif ()
  execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if (NOT rc EQUAL 0)
    message(FATAL_ERROR "${step} failed (${rc}): ${cmd}\n${out}")
  endif ()
endforeach ()
message("${out}")
