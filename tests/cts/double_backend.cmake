# pw_test_double_backend: a deterministic backend written against the public
# plugin header only. The tests link it, and so does pw-bench (its no-op
# mode), so it is defined whenever either is built (the top-level
# CMakeLists.txt includes this file), BUILD_TESTING=OFF included.
set(PW_DOUBLE_DIR ${CMAKE_CURRENT_LIST_DIR})
add_library(pw_test_double_backend STATIC
  ${PW_DOUBLE_DIR}/double_backend.c ${PW_DOUBLE_DIR}/double_exec.c
  ${PW_DOUBLE_DIR}/double_program.c ${PW_DOUBLE_DIR}/double_host.c)
pw_target_warnings(pw_test_double_backend)
target_include_directories(pw_test_double_backend PUBLIC ${PROJECT_SOURCE_DIR}/tests)
target_link_libraries(pw_test_double_backend PUBLIC pathways_static Threads::Threads)

# pw_test_queue_wrapper: a queue-ordered wrapper over any backend
# (tests/support/queue_wrapper.h), for the tests and benchmarks of queued
# launch; defined whenever the double is.
add_library(pw_test_queue_wrapper STATIC ${PROJECT_SOURCE_DIR}/tests/support/queue_wrapper.c)
pw_target_warnings(pw_test_queue_wrapper)
target_include_directories(pw_test_queue_wrapper PUBLIC ${PROJECT_SOURCE_DIR}/tests)
target_link_libraries(pw_test_queue_wrapper PUBLIC pathways_static Threads::Threads)
