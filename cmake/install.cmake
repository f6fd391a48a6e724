# The installable library (docs/API.md, "C"): `make install PREFIX=...` or
# `cmake --install build --prefix DIR` puts in place
#   lib/libufp4.so.X.Y.Z   the shared library, SONAME libufp4.so.MAJOR (libufp4.so.0.MINOR while the
#                          major version is 0, whose minor versions may break the API), exporting
#                          only the public API (ufp4/export.h)
#   lib/libufp4.a          the static library: every layer's objects in one archive
#   include/ufp4/*.h       the public headers
#   lib/pkgconfig/ufp4.pc  for `pkg-config --cflags --libs ufp4` (relocatable: paths from pcfiledir)
#   lib/cmake/ufp4/        the CMake package: find_package(ufp4) gives the imported target ufp4::ufp4
#   bin/ufp4               the command (linked against the static objects, as in the build tree)
#   share/doc/ufp4/        ufp4.txt (`ufp4 help`) and ufp4-CMD.txt (`ufp4 CMD --help`) for each command
# Included after cmake/mpi.cmake, whose MPI choice the libraries follow.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(UFP4_ALL_OBJECTS "")
foreach(layer ${UFP4_LAYERS})
  list(APPEND UFP4_ALL_OBJECTS $<TARGET_OBJECTS:ufp4_${layer}_obj>)
endforeach()
set(UFP4_LIB_DEPS OpenMP::OpenMP_C PkgConfig::CJSON PkgConfig::OPENBLAS PkgConfig::LIBCRYPTO m)
if(UFP4_DIST_MPI)
  list(APPEND UFP4_LIB_DEPS MPI::MPI_C)
endif()
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(UFP4_SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
else()
  set(UFP4_SOVERSION ${PROJECT_VERSION_MAJOR})
endif()

# ufp4_shared: build/libufp4.so in the build root (python/ufp4 loads it from there in a build tree).
add_library(ufp4_shared SHARED ${UFP4_ALL_OBJECTS})
set_target_properties(ufp4_shared PROPERTIES OUTPUT_NAME ufp4 EXPORT_NAME ufp4
  VERSION ${PROJECT_VERSION} SOVERSION ${UFP4_SOVERSION}
  LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR})
target_include_directories(ufp4_shared PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_link_libraries(ufp4_shared PRIVATE ${UFP4_LIB_DEPS})
target_link_options(ufp4_shared PRIVATE -Wl,--version-script=${PROJECT_SOURCE_DIR}/cmake/libufp4.map)
set_property(TARGET ufp4_shared APPEND PROPERTY LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/libufp4.map)
if(UFP4_LINKCHECK)
  target_link_options(ufp4_shared PRIVATE -Wl,--no-undefined)
endif()
add_library(ufp4::ufp4 ALIAS ufp4_shared)

# ufp4_static: build/libufp4.a. Its dependencies come from ufp4.pc's private fields
# (`pkg-config --static --libs ufp4`); the CMake package offers the shared library only.
add_library(ufp4_static STATIC ${UFP4_ALL_OBJECTS})
set_target_properties(ufp4_static PROPERTIES OUTPUT_NAME ufp4 ARCHIVE_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR})

install(TARGETS ufp4_shared EXPORT ufp4Targets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS ufp4_static ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS ufp4 RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ufp4 DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")

set(UFP4_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ufp4)
install(EXPORT ufp4Targets NAMESPACE ufp4:: DESTINATION ${UFP4_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ufp4Config.cmake.in
  ${PROJECT_BINARY_DIR}/ufp4Config.cmake INSTALL_DESTINATION ${UFP4_CMAKE_DIR})
# 0.x: a request for 0.1 accepts 0.1.z only (minor versions may break the API); from 1.0 on, the
# same major version.
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(UFP4_COMPAT SameMinorVersion)
else()
  set(UFP4_COMPAT SameMajorVersion)
endif()
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ufp4ConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY ${UFP4_COMPAT})
install(FILES ${PROJECT_BINARY_DIR}/ufp4Config.cmake ${PROJECT_BINARY_DIR}/ufp4ConfigVersion.cmake
        DESTINATION ${UFP4_CMAKE_DIR})

# ufp4.pc, relocatable: the prefix is found from the file's own folder, so `cmake --install
# --prefix` anywhere gives a working file. Libs.private lists what a static link needs.
string(REGEX REPLACE "[^/]+" ".." UFP4_PC_UP "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
set(UFP4_PC_LIBS_PRIVATE "${OpenMP_C_FLAGS} -lm")
if(UFP4_DIST_MPI)
  foreach(lib ${MPI_C_LIBRARIES})
    string(APPEND UFP4_PC_LIBS_PRIVATE " ${lib}")
  endforeach()
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/ufp4.pc.in ${PROJECT_BINARY_DIR}/ufp4.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ufp4.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The --help texts, made at build time by running the command (cmake/help_texts.cmake); a cross
# build runs it under its emulator, or makes none when it has none.
if(NOT CMAKE_CROSSCOMPILING OR CMAKE_CROSSCOMPILING_EMULATOR)
  set(UFP4_HELP_DIR ${PROJECT_BINARY_DIR}/help)
  add_custom_command(OUTPUT ${UFP4_HELP_DIR}/ufp4.txt
    COMMAND ${CMAKE_COMMAND} "-DUFP4=${CMAKE_CROSSCOMPILING_EMULATOR};$<TARGET_FILE:ufp4>"
            -DOUT=${UFP4_HELP_DIR} -P ${PROJECT_SOURCE_DIR}/cmake/help_texts.cmake
    DEPENDS ufp4 ${PROJECT_SOURCE_DIR}/cmake/help_texts.cmake
    COMMENT "ufp4: --help texts into ${UFP4_HELP_DIR}" VERBATIM)
  add_custom_target(ufp4_help_texts ALL DEPENDS ${UFP4_HELP_DIR}/ufp4.txt)
  install(DIRECTORY ${UFP4_HELP_DIR}/ DESTINATION ${CMAKE_INSTALL_DOCDIR} FILES_MATCHING PATTERN "*.txt")
endif()
