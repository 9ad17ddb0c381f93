# aotk's CMake package. In a project:
#
#   find_package(aotk CONFIG REQUIRED)        # -Daotk_DIR=$(aotk --cmake-dir)
#   aotk_add_library(kernels MANIFEST aotk.toml [TARGETS sm_80 sm_90 ...] [STATIC] [OUT_DIR dir])
#   target_link_libraries(app PRIVATE kernels)
#
# aotk_add_library runs `aotk build` at build time into OUT_DIR (default: a folder named
# after the target in the current binary folder) and makes <target> a library whose include
# folder holds the generated header. The build reruns when the manifest or any kernel source
# it reads changes (aotk's depfile, through CMake's DEPFILE with Ninja and Makefiles).
# AOTK_COMMAND (a list, default: the `aotk` program on PATH) says how to run aotk, e.g.
# -DAOTK_COMMAND="/path/to/python;-m;aotk".
cmake_policy(PUSH)
cmake_policy(VERSION 3.20...3.31)

include_guard(GLOBAL)

if(NOT AOTK_COMMAND)
  find_program(AOTK_EXECUTABLE aotk)
  if(NOT AOTK_EXECUTABLE)
    message(FATAL_ERROR "aotk: the `aotk` program is not on PATH; install aotk (pip install aotk) "
                        "or set AOTK_COMMAND, e.g. -DAOTK_COMMAND=\"python3;-m;aotk\"")
  endif()
  set(AOTK_COMMAND "${AOTK_EXECUTABLE}" CACHE STRING "how to run aotk (a list)")
endif()

function(aotk_add_library target)
  cmake_parse_arguments(PARSE_ARGV 1 AOTK "STATIC" "MANIFEST;OUT_DIR" "TARGETS")
  if(AOTK_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "aotk_add_library(${target}): unknown arguments: ${AOTK_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT AOTK_MANIFEST)
    message(FATAL_ERROR "aotk_add_library(${target}): MANIFEST <aotk.toml> is required")
  endif()
  get_filename_component(manifest "${AOTK_MANIFEST}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  if(NOT EXISTS "${manifest}")
    message(FATAL_ERROR "aotk_add_library(${target}): MANIFEST ${manifest} does not exist")
  endif()
  if(NOT AOTK_OUT_DIR)
    set(AOTK_OUT_DIR "${target}")
  endif()
  get_filename_component(out_dir "${AOTK_OUT_DIR}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")

  # The files the build will write, named by aotk itself (nothing is compiled here).
  execute_process(COMMAND ${AOTK_COMMAND} outputs "${manifest}" -o "${out_dir}"
                  OUTPUT_VARIABLE listing ERROR_VARIABLE error RESULT_VARIABLE status)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "aotk_add_library(${target}): ${error}")
  endif()
  foreach(key library archive header depfile pkgconfig)
    string(REGEX MATCH "${key}=([^\n]*)" line "${listing}")
    set(${key} "${CMAKE_MATCH_1}")
  endforeach()

  set(command ${AOTK_COMMAND} build "${manifest}" -o "${out_dir}")
  set(outputs "${library}" "${header}")
  set(linked "${library}")
  if(AOTK_STATIC)
    list(APPEND command --static)
    list(APPEND outputs "${archive}")
    set(linked "${archive}")
  endif()
  foreach(sm IN LISTS AOTK_TARGETS)
    list(APPEND command --target "${sm}")
  endforeach()
  set(depfile_arguments)
  if(CMAKE_GENERATOR MATCHES "Ninja|Makefiles")
    set(depfile_arguments DEPFILE "${depfile}")
  endif()
  # Byproducts make the Ninja generator restat the outputs: aotk leaves files whose
  # content is unchanged untouched, and what depends on them then does not rebuild.
  add_custom_command(OUTPUT ${outputs}
                     BYPRODUCTS "${pkgconfig}"
                     COMMAND ${command}
                     DEPENDS "${manifest}"
                     ${depfile_arguments}
                     COMMENT "aotk: building ${target} from ${manifest}"
                     VERBATIM)
  add_custom_target(${target}_aotk_build DEPENDS ${outputs})

  add_library(${target} INTERFACE)
  target_include_directories(${target} INTERFACE "${out_dir}")
  target_link_libraries(${target} INTERFACE "${linked}")
  if(AOTK_STATIC)
    # The runtime opens libcuda with dlopen and guards module loading with a mutex.
    find_package(Threads REQUIRED)
    target_link_libraries(${target} INTERFACE ${CMAKE_DL_LIBS} Threads::Threads)
  endif()
  add_dependencies(${target} ${target}_aotk_build)
endfunction()

cmake_policy(POP)
