# FSATTN_KERNELS_FROM=<build dir>: link the kernels that another build of this source tree
# generated, instead of generating them again. For builds that check the runtime, not the
# kernels: the sanitizer build of tests/run.sh, which generated every CPU kernel a second
# time before (about 10 of the CI run's minutes on 2 cores). The other build's options
# decide the table: its kernels, and whether the CUDA paths are built (FSATTN_CUDA).
#
# That build writes what this needs into its generators/ directory when configured
# (fsattn_kernels.cmake, by generators/CMakeLists.txt), and its kernels must be built.

get_filename_component(from "${FSATTN_KERNELS_FROM}/generators" ABSOLUTE BASE_DIR ${CMAKE_BINARY_DIR})
if (NOT EXISTS ${from}/fsattn_kernels.cmake)
  message(FATAL_ERROR "FSATTN_KERNELS_FROM=${FSATTN_KERNELS_FROM}: ${from}/fsattn_kernels.cmake is "
                      "missing; configure that directory as a build of this source tree first")
endif ()
include(${from}/fsattn_kernels.cmake)  # FSATTN_EXPORTED_SOURCE_DIR, _CUDA, _OBJECTS
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${from}/fsattn_kernels.cmake)
if (NOT FSATTN_EXPORTED_SOURCE_DIR STREQUAL PROJECT_SOURCE_DIR)
  message(FATAL_ERROR "FSATTN_KERNELS_FROM=${FSATTN_KERNELS_FROM} is a build of "
                      "${FSATTN_EXPORTED_SOURCE_DIR}, not of this source tree (${PROJECT_SOURCE_DIR})")
endif ()
foreach (object IN LISTS FSATTN_EXPORTED_OBJECTS)
  if (NOT EXISTS ${object})
    message(FATAL_ERROR "FSATTN_KERNELS_FROM=${FSATTN_KERNELS_FROM}: ${object} is missing; "
                        "build that directory first (cmake --build ${FSATTN_KERNELS_FROM})")
  endif ()
endforeach ()
if (NOT FSATTN_CUDA STREQUAL FSATTN_EXPORTED_CUDA)
  message(STATUS "fsattn: FSATTN_CUDA=${FSATTN_EXPORTED_CUDA}, as in ${FSATTN_KERNELS_FROM}")
  set(FSATTN_CUDA ${FSATTN_EXPORTED_CUDA})
endif ()

add_library(fsattn_kernels INTERFACE)
target_include_directories(fsattn_kernels INTERFACE ${from})  # headers, kernel_table.inc
target_link_libraries(fsattn_kernels INTERFACE Halide::Runtime)
set(FSATTN_KERNEL_OBJECTS ${FSATTN_EXPORTED_OBJECTS} CACHE INTERNAL "")
