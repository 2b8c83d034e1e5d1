# Library modules and the edges between them.
#
# Each directory under lib/ that holds sources is one module, built as an
# OBJECT library pw_mod_<dir with / as _> by pw_module(). A module's include
# path holds the public headers and one root per module it may use: the
# root build/modules/<dir>/ contains only a link <dir> -> lib/<dir>, so
# `#include "sched/dispatch_internal.h"` compiles in a module that USES
# sched and fails ("No such file or directory") in any other. USES is
# private and not transitive: a module names every module whose headers it
# includes, directly or through another module's header, and every module
# whose functions it calls (scripts/check-layers checks the calls on the
# built objects: ctest layering_symbols). CMake rejects a cycle among the
# USES edges at configure time. The libraries (pathways, pathways_static)
# are the union of the modules' objects.
#
# The graph is written once more, for readers, in docs/architecture.md
# ("Module map"); tests/layering checks that the two agree.
#
#   pw_module(<dir> SOURCES <file>... [USES <dir>...] [LINKS <dir>...]
#             [PACKAGES <target>...])
#
# LINKS are modules whose public functions (declared in include/pathways)
# the module calls without seeing their internal headers: the bundled
# plugins link base, types and plugin this way, as a host's plugin would,
# and the runtime links the bundled transport it makes by default. A LINKS
# edge is an edge of the graph like a USES edge (ordering, cycle check,
# scripts/check-layers), without the include root.
#
# PACKAGES are the imported targets of external libraries the module's own
# sources use (PkgConfig::PW_ZSTD, ...). A module whose headers include an
# external library's headers lists it too, and so does every user.

set(PW_MODULE_ROOT ${PROJECT_BINARY_DIR}/modules)
set_property(GLOBAL PROPERTY PW_MODULES "")

# What every module is compiled with.
add_library(pw_module_base INTERFACE)
target_include_directories(pw_module_base INTERFACE
  ${PROJECT_SOURCE_DIR}/include
  ${PROJECT_BINARY_DIR}/include)
target_compile_definitions(pw_module_base INTERFACE PW_BUILDING_LIBRARY=1)
target_link_libraries(pw_module_base INTERFACE Threads::Threads)
if(PW_TSAN)
  target_compile_definitions(pw_module_base INTERFACE PW_ATOMICS_C11=1)
endif()

function(pw_module dir)
  cmake_parse_arguments(M "" "" "SOURCES;USES;LINKS;PACKAGES" ${ARGN})
  string(REPLACE "/" "_" id "${dir}")
  set(target pw_mod_${id})
  add_library(${target} OBJECT ${M_SOURCES})
  pw_target_warnings(${target})
  # The module's own include root: one link to its directory.
  set(root ${PW_MODULE_ROOT}/${id})
  get_filename_component(parent "${root}/${dir}" DIRECTORY)
  file(MAKE_DIRECTORY "${parent}")
  file(CREATE_LINK ${PROJECT_SOURCE_DIR}/lib/${dir} ${root}/${dir} SYMBOLIC)
  target_include_directories(${target} INTERFACE ${root})
  target_include_directories(${target} PRIVATE ${root})
  target_link_libraries(${target} PRIVATE pw_module_base ${M_PACKAGES})
  foreach(use IN LISTS M_USES)
    string(REPLACE "/" "_" use_id "${use}")
    target_link_libraries(${target} PRIVATE pw_mod_${use_id})
  endforeach()
  foreach(link IN LISTS M_LINKS)
    string(REPLACE "/" "_" link_id "${link}")
    add_dependencies(${target} pw_mod_${link_id})
  endforeach()
  set_target_properties(${target} PROPERTIES PW_MODULE_DIR "${dir}" PW_MODULE_USES "${M_USES}"
                                             PW_MODULE_LINKS "${M_LINKS}")
  set_property(GLOBAL APPEND PROPERTY PW_MODULES ${target})
endfunction()

define_property(TARGET PROPERTY PW_MODULE_DIR
  BRIEF_DOCS "lib/ directory of a module" FULL_DOCS "Set by pw_module().")
define_property(TARGET PROPERTY PW_MODULE_USES
  BRIEF_DOCS "modules a module may include and call" FULL_DOCS "Set by pw_module().")
define_property(TARGET PROPERTY PW_MODULE_LINKS
  BRIEF_DOCS "modules whose public functions a module may call" FULL_DOCS "Set by pw_module().")

# Writes build/modules/modules.json: per module its directory, its USES,
# its LINKS and its object files, for scripts/check-layers (objects are known only at
# generate time, hence file(GENERATE)).
function(pw_modules_manifest)
  get_property(modules GLOBAL PROPERTY PW_MODULES)
  set(json "{\n")
  set(sep "")
  foreach(target IN LISTS modules)
    get_target_property(dir ${target} PW_MODULE_DIR)
    set(lists "")
    foreach(kind USES LINKS)
      get_target_property(items ${target} PW_MODULE_${kind})
      set(items_json "")
      set(isep "")
      foreach(item IN LISTS items)
        string(APPEND items_json "${isep}\"${item}\"")
        set(isep ", ")
      endforeach()
      string(TOLOWER ${kind} key)
      string(APPEND lists "\"${key}\": [${items_json}], ")
    endforeach()
    string(APPEND json "${sep}  \"${dir}\": {${lists}\"objects\": [\"$<JOIN:$<TARGET_OBJECTS:${target}>,\"$<COMMA> \">\"]}")
    set(sep ",\n")
  endforeach()
  string(APPEND json "\n}\n")
  file(GENERATE OUTPUT ${PW_MODULE_ROOT}/modules.json CONTENT "${json}")
endfunction()
