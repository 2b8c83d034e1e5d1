# Script mode (cmake -P). Inputs: BUILD_DIR WORK_DIR EXAMPLE_DIR C_COMPILER GENERATOR.
#
# Installs the built tree into a scratch prefix, builds the example backend
# plugin (examples/plugin_backend) out of the tree against that prefix
# with find_package(pathways), and runs the installed pathways-cts on it
# (every case must pass), then on an installed bundled module found by
# name.
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(LAST_OUTPUT "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
if(NOT EXISTS ${prefix}/bin/pathways-cts)
  message(FATAL_ERROR "cmake --install did not install bin/pathways-cts")
endif()
if(NOT EXISTS ${prefix}/include/pathways/cts.h)
  message(FATAL_ERROR "cmake --install did not install include/pathways/cts.h")
endif()

run(${CMAKE_COMMAND} -S ${EXAMPLE_DIR} -B ${WORK_DIR}/example-build -G ${GENERATOR}
    -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_PREFIX_PATH=${prefix})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/example-build)
set(plugin ${WORK_DIR}/example-build/libpathways_example.so)

unset(ENV{LD_LIBRARY_PATH})
unset(ENV{PATHWAYS_PLUGIN_PATH})
foreach(args "devices=2" "devices=4,memory_mib=16")
  run(${prefix}/bin/pathways-cts --args "${args}" --format junit
      --output ${WORK_DIR}/example.xml ${plugin})
  file(READ ${WORK_DIR}/example.xml report)
  if(NOT report MATCHES "<testsuites tests=\"[1-9][0-9]*\" failures=\"0\"")
    message(FATAL_ERROR "unexpected pathways-cts report for the example:\n${report}")
  endif()
  run(${prefix}/bin/pathways-cts --args "${args}" ${plugin})
  if(NOT LAST_OUTPUT MATCHES "ok [0-9]+ - backend.launch_copy\n" OR LAST_OUTPUT MATCHES "not ok")
    message(FATAL_ERROR "unexpected pathways-cts output for the example:\n${LAST_OUTPUT}")
  endif()
endforeach()
message(STATUS "the example backend, built against the installed prefix, passes pathways-cts")

# A bundled module by name, from the installed plugin directory.
run(${prefix}/bin/pathways-cts --args "path={tmp}/store" dir)
if(NOT LAST_OUTPUT MATCHES "ok [0-9]+ - store.put_get\n" OR LAST_OUTPUT MATCHES "not ok")
  message(FATAL_ERROR "unexpected pathways-cts output for the installed dir store:\n${LAST_OUTPUT}")
endif()
message(STATUS "the installed dir store module passes pathways-cts")
