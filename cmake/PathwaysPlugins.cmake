# The bundled plugins as loadable modules (pathways/plugin.h, docs/plugins.md).
#
#   pw_plugin_module(<name> SOURCES <file>...)
#
# builds MODULE library pathways_<name> -> libpathways_<name>.so, whose
# sources define pw_plugin_entry, linked to the shared libpathways as a
# host's plugin would be. Every module is built into one directory of the
# build tree, PW_PLUGIN_BUILD_DIR (lib/pathways/plugins, beside
# libpathways.so: pw_plugin_dir() of an uninstalled build), and installed
# to LIBDIR/pathways/plugins with the runpath $ORIGIN/../.. (libpathways.so.1
# two levels up, under any prefix). The target pathways_plugins builds
# them all; the global property PW_PLUGIN_MODULES lists their targets.

set(PW_PLUGIN_SUBDIR pathways/plugins)
set(PW_PLUGIN_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/${PW_PLUGIN_SUBDIR})
set(PW_PLUGIN_BUILD_DIR ${PROJECT_BINARY_DIR}/lib/${PW_PLUGIN_SUBDIR})
set_property(GLOBAL PROPERTY PW_PLUGIN_MODULES "")
add_custom_target(pathways_plugins)

function(pw_plugin_module name)
  cmake_parse_arguments(P "" "" "SOURCES" ${ARGN})
  set(target pathways_${name})
  add_library(${target} MODULE ${P_SOURCES})
  pw_target_warnings(${target})
  target_link_libraries(${target} PRIVATE pathways)
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    LIBRARY_OUTPUT_DIRECTORY ${PW_PLUGIN_BUILD_DIR}
    INSTALL_RPATH "$ORIGIN/../..")
  install(TARGETS ${target} LIBRARY DESTINATION ${PW_PLUGIN_INSTALL_DIR})
  add_dependencies(pathways_plugins ${target})
  set_property(GLOBAL APPEND PROPERTY PW_PLUGIN_MODULES ${target})
endfunction()
