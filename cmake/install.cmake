# Installation: the shared and static libraries with an export set, the public
# headers, a CMake package (find_package(kiln) -> kiln::kiln, kiln::kiln_static),
# a pkg-config file and the command-line tools. Included from the top-level
# CMakeLists.txt after every target is defined.
include(CMakePackageConfigHelpers)

set(KILN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)

# The static library passes its private dependencies on to whoever links it.
# In the build tree cJSON is a library path found at configure time; in an
# installed package it is the imported target kiln::cjson, which
# kilnConfig.cmake creates from the consumer's own find_library.
get_target_property(kiln_static_interface kiln_static INTERFACE_LINK_LIBRARIES)
list(FIND kiln_static_interface "${CJSON_LIBRARY}" kiln_cjson_at)
if(kiln_cjson_at LESS 0)
  message(FATAL_ERROR "cmake/install.cmake: kiln_static no longer links \${CJSON_LIBRARY} privately; "
                      "update how the installed package finds cJSON.")
endif()
list(REMOVE_AT kiln_static_interface ${kiln_cjson_at})
list(INSERT kiln_static_interface ${kiln_cjson_at}
     "$<LINK_ONLY:$<BUILD_INTERFACE:${CJSON_LIBRARY}>$<INSTALL_INTERFACE:kiln::cjson>>")
set_target_properties(kiln_static PROPERTIES INTERFACE_LINK_LIBRARIES "${kiln_static_interface}")

install(TARGETS kiln kiln_static
  EXPORT kilnTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/include/kiln
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")

install(EXPORT kilnTargets NAMESPACE kiln:: DESTINATION ${KILN_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/kilnConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/kilnConfig.cmake
  INSTALL_DESTINATION ${KILN_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/kilnConfigVersion.cmake
  VERSION ${PROJECT_VERSION}
  COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/kilnConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/kilnConfigVersion.cmake
  DESTINATION ${KILN_CMAKE_DIR})

# kiln.pc locates its prefix relative to itself, so a staged or moved install
# works without editing it.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(KILN_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(KILN_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  file(RELATIVE_PATH kiln_pc_up /${CMAKE_INSTALL_LIBDIR}/pkgconfig /)
  string(REGEX REPLACE "/$" "" kiln_pc_up "${kiln_pc_up}")
  set(KILN_PC_PREFIX "\${pcfiledir}/${kiln_pc_up}")
  set(KILN_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(KILN_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(KILN_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/kiln.pc.in ${CMAKE_CURRENT_BINARY_DIR}/kiln.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/kiln.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

foreach(tool kiln-info kiln-bench kiln-tune)
  if(TARGET ${tool})
    install(TARGETS ${tool} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()
