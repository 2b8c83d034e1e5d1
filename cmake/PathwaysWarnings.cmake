# Warning flags for every target built from this tree (library, tests, bench).
set(PW_WARNING_FLAGS
  -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes
  -Wpointer-arith -Wformat=2 -Wvla -Wno-unused-parameter)
if(PW_WERROR)
  list(APPEND PW_WARNING_FLAGS -Werror)
endif()

function(pw_target_warnings target)
  target_compile_options(${target} PRIVATE ${PW_WARNING_FLAGS})
endfunction()
