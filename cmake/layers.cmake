# The library is built as layers, one folder of src/ each, listed here from the bottom up. Each
# layer is a static library that links only the layers below it, so the architecture is a fact of
# the build, not of a table in a document (docs/ARCHITECTURE.md):
#
#   ufp4_layer(NAME DEPS lower layers...)
#
# compiles src/NAME/*.c (and src/NAME/x86/*.c when the x86 kernels are on) into ufp4_NAME. Two
# checks keep the layers honest:
#   - the link: ufp4_NAME_linkcheck, a shared library of the same objects linked with
#     -Wl,--no-undefined against the static libraries of DEPS only (static, because the objects
#     are compiled with hidden visibility and a shared library exports only the public API, while
#     a layer may call the internal functions of the layers below); a call into a layer above (or
#     a sibling not listed) leaves an undefined symbol and fails the build;
#   - the includes: scripts/check_layers.py (a ctest test) fails when a file includes a header of a
#     layer above its own, which the link cannot see for inline functions and macros.
# The sanitizer and fuzz builds skip the link check (their runtimes leave symbols undefined on
# purpose).

option(UFP4_SIMD "Compile the x86 AVX2 kernels (only on x86-64); OFF builds the scalar reference alone" ON)
if(UFP4_SIMD AND CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(UFP4_X86 ON)
else()
  set(UFP4_X86 OFF)
endif()
message(STATUS "ufp4: x86 AVX2 kernels ${UFP4_X86} (UFP4_SIMD=${UFP4_SIMD}, ${CMAKE_SYSTEM_PROCESSOR})")

set(UFP4_LINKCHECK ON)
if(UFP4_SANITIZE OR UFP4_FUZZ)
  set(UFP4_LINKCHECK OFF)
endif()

set(UFP4_LAYERS "")
set(UFP4_LIB_SOURCES "")
function(ufp4_layer name)
  cmake_parse_arguments(L "" "" "DEPS" ${ARGN})
  file(GLOB srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${name}/*.c)
  if(UFP4_X86)
    file(GLOB x86 CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${name}/x86/*.c)
    list(APPEND srcs ${x86})
  endif()
  set(objs ufp4_${name}_obj)
  add_library(${objs} OBJECT ${srcs})
  # Hidden by default: only what include/ufp4/ declares (between UFP4_API_BEGIN and UFP4_API_END,
  # ufp4/export.h) is exported by the shared library, libufp4.so (cmake/install.cmake). The static
  # libraries, and so the CLI and the tests, still see every symbol.
  set_target_properties(${objs} PROPERTIES POSITION_INDEPENDENT_CODE ON C_VISIBILITY_PRESET hidden)
  target_include_directories(${objs} PUBLIC ${PROJECT_SOURCE_DIR}/include PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${objs} PUBLIC OpenMP::OpenMP_C PkgConfig::CJSON PkgConfig::OPENBLAS)
  if(UFP4_X86)
    target_compile_definitions(${objs} PRIVATE UFP4_HAVE_X86=1)
  endif()
  add_library(ufp4_${name} STATIC $<TARGET_OBJECTS:${objs}>)
  target_include_directories(ufp4_${name} PUBLIC ${PROJECT_SOURCE_DIR}/include)
  set(deps "")
  foreach(d ${L_DEPS})
    list(APPEND deps ufp4_${d})
  endforeach()
  target_link_libraries(ufp4_${name} PUBLIC ${deps} OpenMP::OpenMP_C PkgConfig::CJSON PkgConfig::OPENBLAS m)
  if(UFP4_LINKCHECK)
    add_library(ufp4_${name}_linkcheck SHARED $<TARGET_OBJECTS:${objs}>)
    target_link_libraries(ufp4_${name}_linkcheck PRIVATE ${deps} OpenMP::OpenMP_C PkgConfig::CJSON
                          PkgConfig::OPENBLAS m)
    target_link_options(ufp4_${name}_linkcheck PRIVATE -Wl,--no-undefined)
    set_target_properties(ufp4_${name}_linkcheck PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/linkcheck)
  endif()
  set(UFP4_LAYERS ${UFP4_LAYERS} ${name} PARENT_SCOPE)
  set(UFP4_LIB_SOURCES ${UFP4_LIB_SOURCES} ${srcs} PARENT_SCOPE)
endfunction()
