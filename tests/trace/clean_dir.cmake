# Empties the directory the trace-writing tests write into (ctest fixture
# traces_dir, tests/trace/CMakeLists.txt): trace_validate then checks what
# this run wrote, never a stale file. Usage: cmake -DDIR=<dir> -P clean_dir.cmake
file(REMOVE_RECURSE "${DIR}")
file(MAKE_DIRECTORY "${DIR}")
