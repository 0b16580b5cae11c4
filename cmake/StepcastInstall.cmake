# Aliases, install rules and the CMake package (find_package(stepcast)), in one place so the
# folders' own CMakeLists.txt stay short. Included by the top level after every folder.
#
#   cmake --install build --prefix /opt/stepcast
#   # another project:
#   find_package(stepcast 0.1 REQUIRED)          # CMAKE_PREFIX_PATH=/opt/stepcast
#   target_link_libraries(app PRIVATE stepcast::models)
#
# Installs: bin/stepcast; <libdir>/libstepcast_*.a; <libdir>/stepcast/libstepcast-*.so (the
# runtime-loaded plugins, found relative to bin/ or at this absolute path);
# include/stepcast/<folder>/*.h; <libdir>/cmake/stepcast/.
include(CMakePackageConfigHelpers)

# Library targets, in dependency order; folders that do not exist (yet) are skipped.
set(_stepcast_libraries models analysis sim planner executor executor_cuda app)

foreach(_name IN LISTS _stepcast_libraries)
  set(_target stepcast_${_name})
  if(NOT TARGET ${_target})
    continue()
  endif()
  if(NOT TARGET stepcast::${_name})
    add_library(stepcast::${_name} ALIAS ${_target})
  endif()
  set_target_properties(${_target} PROPERTIES EXPORT_NAME ${_name})
  # Source-tree include directories become <prefix>/include once installed.
  get_target_property(_dirs ${_target} INTERFACE_INCLUDE_DIRECTORIES)
  if(_dirs)
    set(_fixed "")
    foreach(_dir IN LISTS _dirs)
      if(_dir MATCHES "^\\$<" OR NOT _dir MATCHES "^${PROJECT_SOURCE_DIR}/")
        list(APPEND _fixed "${_dir}")
      else()
        list(APPEND _fixed "$<BUILD_INTERFACE:${_dir}>")
        if(IS_DIRECTORY ${_dir}/stepcast)
          install(DIRECTORY ${_dir}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
        endif()
      endif()
    endforeach()
    list(APPEND _fixed "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
    list(REMOVE_DUPLICATES _fixed)
    set_target_properties(${_target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_fixed}")
  endif()
  install(TARGETS ${_target} EXPORT stepcastTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endforeach()

# The INTERFACE target every library links: part of the export set; its warning flags are
# for this project's build only (BUILD_INTERFACE), its sanitizer link flags carry over.
set_target_properties(stepcast_warnings PROPERTIES EXPORT_NAME warnings)
install(TARGETS stepcast_warnings EXPORT stepcastTargets)

# The command and the runtime-loaded plugins (not part of the export set: nothing links them).
if(TARGET stepcast)
  install(TARGETS stepcast RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
foreach(_plugin stepcast_simgrid_plugin)
  if(TARGET ${_plugin})
    install(TARGETS ${_plugin} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/stepcast)
  endif()
endforeach()

set(STEPCAST_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/stepcast)
install(EXPORT stepcastTargets NAMESPACE stepcast:: DESTINATION ${STEPCAST_INSTALL_CMAKEDIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/stepcastConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/stepcastConfig.cmake
                              INSTALL_DESTINATION ${STEPCAST_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/stepcastConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/stepcastConfig.cmake ${PROJECT_BINARY_DIR}/stepcastConfigVersion.cmake
        DESTINATION ${STEPCAST_INSTALL_CMAKEDIR})
