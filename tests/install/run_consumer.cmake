# Script mode (cmake -P). Inputs: BUILD_DIR WORK_DIR CONSUMER_DIR C_COMPILER GENERATOR.
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

# 1. CMake package.
run(${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/cmake-build -G ${GENERATOR}
    -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_PREFIX_PATH=${prefix})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/cmake-build)
run(${WORK_DIR}/cmake-build/consumer)
if(NOT LAST_OUTPUT MATCHES "consumer ok: libpathways [0-9]+\\.[0-9]+\\.[0-9]+")
  message(FATAL_ERROR "unexpected consumer output: ${LAST_OUTPUT}")
endif()
message(STATUS "find_package consumer: ${LAST_OUTPUT}")
run(${WORK_DIR}/cmake-build/consumer_static)
if(NOT LAST_OUTPUT MATCHES "consumer ok: libpathways [0-9]+\\.[0-9]+\\.[0-9]+")
  message(FATAL_ERROR "unexpected static consumer output: ${LAST_OUTPUT}")
endif()
message(STATUS "find_package static consumer: ${LAST_OUTPUT}")

# 2. pkg-config, from a moved prefix.
set(moved ${WORK_DIR}/moved-prefix)
file(RENAME ${prefix} ${moved})
file(GLOB pcdirs ${moved}/lib*/pkgconfig)
list(GET pcdirs 0 pcdir)
set(ENV{PKG_CONFIG_PATH} ${pcdir})
run(pkg-config --cflags pathways)
string(STRIP "${LAST_OUTPUT}" cflags)
if(cflags MATCHES "-D__x86_64__")
  message(FATAL_ERROR "pkg-config --cflags pathways leaks a dependency's flags: ${cflags}")
endif()
run(pkg-config --libs pathways)
string(STRIP "${LAST_OUTPUT}" libs)
run(pkg-config --variable=libdir pathways)
string(STRIP "${LAST_OUTPUT}" libdir)
if(NOT libdir MATCHES "^${moved}")
  message(FATAL_ERROR "pathways.pc is not relocatable: libdir=${libdir}")
endif()
separate_arguments(cflags UNIX_COMMAND "${cflags}")
separate_arguments(libs UNIX_COMMAND "${libs}")
run(${C_COMPILER} -std=c11 ${cflags} ${CONSUMER_DIR}/consumer.c ${CONSUMER_DIR}/plugins.c -o ${WORK_DIR}/pc-consumer
    ${libs} -Wl,-rpath,${libdir})
run(${WORK_DIR}/pc-consumer)
if(NOT LAST_OUTPUT MATCHES "consumer ok")
  message(FATAL_ERROR "unexpected pkg-config consumer output: ${LAST_OUTPUT}")
endif()
message(STATUS "pkg-config consumer: ${LAST_OUTPUT}")

# 2b. The bundled plugin modules, installed to pkg-config's plugindir and
# found by name from the moved prefix (pw_plugin_dir beside libpathways.so).
run(pkg-config --variable=plugindir pathways)
string(STRIP "${LAST_OUTPUT}" plugindir)
foreach(name cpu sim inproc dir)
  if(NOT EXISTS ${plugindir}/libpathways_${name}.so)
    message(FATAL_ERROR "plugin module not installed: ${plugindir}/libpathways_${name}.so")
  endif()
endforeach()
run(${C_COMPILER} -std=c11 ${cflags} ${CONSUMER_DIR}/load_plugin.c -o ${WORK_DIR}/load-plugin
    ${libs} -Wl,-rpath,${libdir})
run(${WORK_DIR}/load-plugin)
if(NOT LAST_OUTPUT MATCHES "plugin cpu: ${moved}/[^\n]*/libpathways_cpu.so" OR
   NOT LAST_OUTPUT MATCHES "plugins ok")
  message(FATAL_ERROR "plugins not loaded from the moved prefix: ${LAST_OUTPUT}")
endif()
message(STATUS "plugins by name from the moved prefix: ${LAST_OUTPUT}")

# 3. The installed tool from the moved prefix: it finds libpathways.so.1
# through its runpath, with no LD_LIBRARY_PATH.
unset(ENV{LD_LIBRARY_PATH})
run(${moved}/bin/pathways-graph --help)
if(NOT LAST_OUTPUT MATCHES "usage: pathways-graph")
  message(FATAL_ERROR "unexpected pathways-graph output: ${LAST_OUTPUT}")
endif()
message(STATUS "pathways-graph runs from a moved prefix")
