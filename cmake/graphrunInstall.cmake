# cmake/graphrunInstall.cmake - install and export rules, included from the
# top-level CMakeLists.txt after the library targets exist.
#
# `cmake --install BUILD --prefix P` gives P/include/graphrun.h,
# P/lib/libgraphrun.{a,so*}, P/lib/libgraphrun-{cuda,mpi}.so (the modules
# that were built), P/bin/graphrun, P/lib/pkgconfig/graphrun.pc and
# P/lib/cmake/graphrun/, so that find_package(graphrun) provides
# graphrun::graphrun (shared) and graphrun::graphrun_static.
#
# The modules are opened with dlopen, never linked: neither the package
# config nor the .pc file asks for CUDA or MPI, and a program of any
# language (project(app CXX)) finds the package with only the core's
# dependencies installed.
#
# graphrun_obj is not exported: its include dirs point into the source tree
# and its link deps are imported targets that exist only in this build.  So
# the two libraries see it only in the build tree, and the installed targets
# get their own interface, derived below from graphrun_obj's link deps so
# that a dependency added to graphrun_obj shows up here without an edit.
include(CMakePackageConfigHelpers)

set(GR_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/graphrun)

# Appends to the pkg-config fields and the config-file code for one link dep.
function(gr_export_dep dep)
    set(req ${GR_PC_REQUIRES})
    set(libs ${GR_PC_LIBS})
    set(code ${GR_CONFIG_DEPS})
    if(dep MATCHES "^PkgConfig::(.+)$")
        set(mod ${${CMAKE_MATCH_1}_MODULE_NAME})
        if(NOT mod)
            message(FATAL_ERROR "graphrun install: ${dep} has no pkg-config module name "
                                "(pkg_check_modules with exactly one module sets it)")
        endif()
        list(APPEND req ${mod})
        string(APPEND code "gr_find_pkg(${CMAKE_MATCH_1} ${mod})\n")
    elseif(dep STREQUAL "ZLIB::ZLIB")
        list(APPEND req zlib)
        string(APPEND code "find_dependency(ZLIB)\n")
    elseif(dep STREQUAL "Threads::Threads")
        list(APPEND libs -pthread)
        string(APPEND code "find_dependency(Threads)\n")
    elseif(dep MATCHES "^(MPI|CUDA)::")
        message(FATAL_ERROR "graphrun install: the core links ${dep}; MPI and CUDA belong "
                            "to the modules (runtime/modules.h), which link them themselves")
    elseif(TARGET ${dep})
        message(FATAL_ERROR "graphrun install: do not know how to export link dep ${dep}; "
                            "teach cmake/graphrunInstall.cmake about it")
    elseif(dep MATCHES "^(/|-)")
        list(APPEND libs ${dep})
    else()
        list(APPEND libs -l${dep})
    endif()
    set(GR_PC_REQUIRES ${req} PARENT_SCOPE)
    set(GR_PC_LIBS ${libs} PARENT_SCOPE)
    set(GR_CONFIG_DEPS "${code}" PARENT_SCOPE)
endfunction()

set(GR_PC_REQUIRES)
set(GR_PC_LIBS)
set(GR_CONFIG_DEPS "")
get_target_property(GR_OBJ_DEPS graphrun_obj INTERFACE_LINK_LIBRARIES)
foreach(dep ${GR_OBJ_DEPS})
    gr_export_dep(${dep})
endforeach()
list(REMOVE_DUPLICATES GR_PC_REQUIRES)
list(REMOVE_DUPLICATES GR_PC_LIBS)
string(REPLACE ";" ", " GR_PC_REQUIRES "${GR_PC_REQUIRES}")
string(REPLACE ";" " " GR_PC_LIBS "${GR_PC_LIBS}")

# Build tree: the libraries pass graphrun_obj's usage requirements on.
# Install tree: the header dir; the static library also lists its link
# deps (LINK_ONLY: the public header needs none of their headers).
foreach(t graphrun_static graphrun_shared)
    set_property(TARGET ${t} PROPERTY INTERFACE_LINK_LIBRARIES $<BUILD_INTERFACE:graphrun_obj>)
    target_include_directories(${t} INTERFACE $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
endforeach()
foreach(dep ${GR_OBJ_DEPS})
    target_link_libraries(graphrun_static INTERFACE $<INSTALL_INTERFACE:$<LINK_ONLY:${dep}>>)
endforeach()
set_target_properties(graphrun_shared PROPERTIES EXPORT_NAME graphrun)
set_target_properties(graphrun_static PROPERTIES EXPORT_NAME graphrun_static)

install(TARGETS graphrun_static graphrun_shared EXPORT graphrunTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS graphrun RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(GR_MODULE_TARGETS)
    install(TARGETS ${GR_MODULE_TARGETS} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
install(FILES include/graphrun.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT graphrunTargets NAMESPACE graphrun:: DESTINATION ${GR_CMAKE_DIR})

configure_package_config_file(cmake/graphrunConfig.cmake.in
    ${CMAKE_CURRENT_BINARY_DIR}/graphrunConfig.cmake INSTALL_DESTINATION ${GR_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/graphrunConfigVersion.cmake
    COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/graphrunConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/graphrunConfigVersion.cmake
        DESTINATION ${GR_CMAKE_DIR})

# The .pc file finds its prefix from its own location, so it stays right
# for `cmake --install --prefix` and for a moved install tree.
file(RELATIVE_PATH GR_PC_TO_PREFIX /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
string(REGEX REPLACE "/$" "" GR_PC_TO_PREFIX "${GR_PC_TO_PREFIX}")
configure_file(cmake/graphrun.pc.in ${CMAKE_CURRENT_BINARY_DIR}/graphrun.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/graphrun.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
