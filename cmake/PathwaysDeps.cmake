# Finds the library's dependencies through pkg-config. A missing one stops
# configure with the Debian package that provides it.
find_package(PkgConfig QUIET)
if(NOT PKG_CONFIG_FOUND)
  message(FATAL_ERROR
    "pkg-config not found: install it with `sudo apt-get install -y pkg-config` "
    "(or run scripts/deps.sh)")
endif()

find_package(Threads REQUIRED)

# pw_require_pkg(<prefix> <pkg-config name> <apt package>)
function(pw_require_pkg prefix module apt)
  pkg_check_modules(${prefix} QUIET IMPORTED_TARGET GLOBAL ${module})
  if(NOT ${prefix}_FOUND)
    message(FATAL_ERROR
      "libpathways needs ${module} (pkg-config module '${module}' not found): "
      "install it with `sudo apt-get install -y ${apt}` (or run scripts/deps.sh)")
  endif()
  message(STATUS "Found ${module} ${${prefix}_VERSION}")
  # pathways_static's installed interface names these (lib/CMakeLists.txt):
  # pkg_check_modules sets them in this function's scope only.
  set(${prefix}_LINK_LIBRARIES "${${prefix}_LINK_LIBRARIES}" PARENT_SCOPE)
endfunction()

pw_require_pkg(PW_CK ck libck-dev)
pw_require_pkg(PW_CBOR libcbor libcbor-dev)
pw_require_pkg(PW_ZSTD libzstd libzstd-dev)
pw_require_pkg(PW_XXHASH libxxhash libxxhash-dev)
pw_require_pkg(PW_JANSSON jansson libjansson-dev)
pw_require_pkg(PW_MHD libmicrohttpd libmicrohttpd-dev)
if(PW_BUILD_TESTS)
  pw_require_pkg(PW_CRITERION criterion libcriterion-dev)
endif()
# The multi-host runtime: UCX (ucp) for shard bytes, nng for control messages.
pw_require_pkg(PW_UCX ucx libucx-dev)
find_package(nng 1.5 CONFIG QUIET)
if(NOT nng_FOUND)
  message(FATAL_ERROR
    "libpathways needs nng (CMake package 'nng' not found): "
    "install it with `sudo apt-get install -y libnng-dev` (or run scripts/deps.sh)")
endif()
message(STATUS "Found nng ${nng_VERSION}")
