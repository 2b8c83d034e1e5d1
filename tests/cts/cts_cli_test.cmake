# Script mode (cmake -P). Inputs: CTS (pathways-cts), DOUBLE (the double
# plugin), NOT_A_PLUGIN (a shared object without pw_plugin_entry), WORK_DIR,
# SANITIZED (non-empty under ASan, whose handler, or UCX's that the
# sanitizer build loads, turns SIGSEGV into an exit or an abort with a
# report).
#
# pathways-cts as a CI job sees it: exit statuses (0 pass, 1 a case
# failed, 2 usage or load error, with a message naming the problem), a
# crashing, exiting or hanging case reported as failed while the run goes
# on, --list, --filter, --unsupported, and a JUnit report.
function(cts expect_rc)
  execute_process(COMMAND ${CTS} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                  ERROR_VARIABLE err)
  if(NOT rc EQUAL expect_rc)
    message(FATAL_ERROR "pathways-cts ${ARGN}: exit ${rc}, expected ${expect_rc}\n${out}\n${err}")
  endif()
  set(OUT "${out}" PARENT_SCOPE)
  set(ERR "${err}" PARENT_SCOPE)
endfunction()

function(expect text pattern what)
  if(NOT text MATCHES "${pattern}")
    message(FATAL_ERROR "${what}: no match for '${pattern}' in:\n${text}")
  endif()
endfunction()

set(SEGV "signal 11")
if(SANITIZED)
  set(SEGV "(signal [0-9]+|exit status 1)")
endif()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

# Usage and load errors: 2, with a message.
cts(2)
expect("${ERR}" "no PLUGIN given" "no plugin")
cts(2 --format xml ${DOUBLE})
expect("${ERR}" "--format must be tap or junit" "bad format")
cts(2 --bogus ${DOUBLE})
expect("${ERR}" "unknown option --bogus" "unknown option")
cts(2 ${WORK_DIR}/missing.so)
expect("${ERR}" "cannot load plugin.*missing.so" "missing file")
cts(2 ${NOT_A_PLUGIN})
expect("${ERR}" "cannot load plugin.*pw_plugin_entry" "no entry point")
cts(2 --unsupported launch_copy,no_such_case ${DOUBLE})
expect("${ERR}" "'no_such_case' .*is not a backend case" "a typo in the unsupported list")

# --list and --filter.
cts(0 --list ${DOUBLE})
expect("${OUT}" "^backend.vtable_basics\n" "list")
expect("${OUT}" "\nbackend.host_launch_failed_device\n$" "list")
cts(0 --list)
expect("${OUT}" "\ntransport.strided_copies\n" "list of every kind")
expect("${OUT}" "\nstore.concurrent\n" "list of every kind")
cts(0 --filter "backend.memory_*" --unsupported backend.memory_too_large ${DOUBLE})
expect("${OUT}" "1\\.\\.4\n" "filter")
expect("${OUT}" "ok 4 - backend.memory_too_large # SKIP listed as unsupported\n" "unsupported")

# A case that fails: 1, "not ok" with the assertion's text.
cts(1 --args bogus=1 --filter backend.devices ${DOUBLE})
expect("${OUT}" "not ok 1 - backend.devices # exit status 1\n# .*unknown key 'bogus'" "failure")

# Crashes, exits and hangs fail their case; the next case still runs.
cts(1 --args misbehave=crash --filter "backend.[dv]*" ${DOUBLE})
expect("${OUT}" "not ok 1 - backend.vtable_basics # ${SEGV}" "crash")
expect("${OUT}" "not ok 2 - backend.devices # ${SEGV}" "crash, next case")
cts(1 --args misbehave=exit --filter backend.devices ${DOUBLE})
expect("${OUT}" "not ok 1 - backend.devices # exit status 3" "exit")
cts(1 --args misbehave=hang --timeout 1 --filter "backend.[dv]*" ${DOUBLE})
expect("${OUT}" "not ok 1 - backend.vtable_basics # timeout after 1 s" "hang")
expect("${OUT}" "not ok 2 - backend.devices # timeout after 1 s" "hang, next case")

# JUnit: a report file; the failure and its message in it.
cts(1 --args misbehave=crash --filter backend.devices --format junit
    --output ${WORK_DIR}/report.xml ${DOUBLE})
file(READ ${WORK_DIR}/report.xml xml)
expect("${xml}" "<testsuites tests=\"1\" failures=\"1\" skipped=\"0\"" "junit totals")
expect("${xml}" "<testcase classname=\"pathways-cts.backend\" name=\"devices\"" "junit case")
expect("${xml}" "<failure message=\"${SEGV}" "junit failure")
cts(0 --filter "backend.memory_*" --unsupported memory_zero_size --format junit
    --output ${WORK_DIR}/pass.xml ${DOUBLE})
file(READ ${WORK_DIR}/pass.xml xml)
expect("${xml}" "tests=\"4\" failures=\"0\" skipped=\"1\"" "junit pass")
expect("${xml}" "<skipped message=\"listed as unsupported\"/>" "junit skip")
message(STATUS "pathways-cts command line: ok")
