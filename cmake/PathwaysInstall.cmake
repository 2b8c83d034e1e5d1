# install(): headers, both libraries, an exported CMake package
# (find_package(pathways) -> pathways::pathways) and a relocatable pathways.pc.
include(CMakePackageConfigHelpers)

set(PW_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/pathways)

install(TARGETS pathways pathways_static
  EXPORT pathwaysTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/pathways
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/include/pathways/version.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/pathways)

install(EXPORT pathwaysTargets
  NAMESPACE pathways::
  DESTINATION ${PW_CMAKE_INSTALL_DIR})

configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/pathwaysConfig.cmake.in
  ${PROJECT_BINARY_DIR}/pathwaysConfig.cmake
  INSTALL_DESTINATION ${PW_CMAKE_INSTALL_DIR})
# 0.y: a minor release may break the ABI (SOVERSION follows), so a
# consumer asking for 0.2 must not get 0.3.
write_basic_package_version_file(
  ${PROJECT_BINARY_DIR}/pathwaysConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMinorVersion)
install(FILES
  ${PROJECT_BINARY_DIR}/pathwaysConfig.cmake
  ${PROJECT_BINARY_DIR}/pathwaysConfigVersion.cmake
  DESTINATION ${PW_CMAKE_INSTALL_DIR})

# pkg-config: prefix is derived from the .pc file's own location, so the
# installed tree can be moved.
file(RELATIVE_PATH PW_PC_TO_PREFIX
  ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" PW_PC_TO_PREFIX "${PW_PC_TO_PREFIX}")
configure_file(${PROJECT_SOURCE_DIR}/cmake/pathways.pc.in
  ${PROJECT_BINARY_DIR}/pathways.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/pathways.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
