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
# TLS on the control plane: nng's TLS engine is mbedTLS (Debian's
# libnng-dev depends on libmbedtls-dev). lib/wire checks PEM files and
# certificate/key pairs with it before nng sees them (lib/wire/wire_tls.h).
find_path(PW_MBEDTLS_INCLUDE_DIR mbedtls/x509_crt.h)
find_library(PW_MBEDX509_LIBRARY mbedx509)
find_library(PW_MBEDCRYPTO_LIBRARY mbedcrypto)
if(NOT PW_MBEDTLS_INCLUDE_DIR OR NOT PW_MBEDX509_LIBRARY OR NOT PW_MBEDCRYPTO_LIBRARY)
  message(FATAL_ERROR
    "libpathways needs mbedTLS's x509 and crypto libraries (nng's TLS engine): "
    "install them with `sudo apt-get install -y libmbedtls-dev` (or run scripts/deps.sh)")
endif()
add_library(pw_mbedtls INTERFACE IMPORTED GLOBAL)
target_include_directories(pw_mbedtls INTERFACE ${PW_MBEDTLS_INCLUDE_DIR})
target_link_libraries(pw_mbedtls INTERFACE ${PW_MBEDX509_LIBRARY} ${PW_MBEDCRYPTO_LIBRARY})
message(STATUS "Found mbedTLS: ${PW_MBEDX509_LIBRARY}")
