# cmake -DBUILD_DIR=... -DOK=<target> -DBAD=<target> -DEXPECT=<regex> -P expect_build.cmake
# Builds OK (must succeed), then BAD (must fail with a line matching EXPECT).
foreach(which OK BAD)
  execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${${which}}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(which STREQUAL "OK" AND NOT rc EQUAL 0)
    message(FATAL_ERROR "the control ${OK} does not build:\n${out}")
  endif()
endforeach()
if(rc EQUAL 0)
  message(FATAL_ERROR "${BAD} built: the include across a missing edge was not rejected")
endif()
string(REGEX MATCH "[^\n]*${EXPECT}[^\n]*" line "${out}")
if(line STREQUAL "")
  message(FATAL_ERROR "${BAD} failed, but not with \"${EXPECT}\":\n${out}")
endif()
message(STATUS "rejected as it should be: ${line}")
