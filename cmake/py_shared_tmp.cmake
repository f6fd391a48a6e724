# TEMPORARY, replaced at merge by the installable library's own `ufp4_shared` target (issue 15):
# a plain shared libufp4.so in the build root, linked from the layers' object files (the sources of
# UFP4_LIB_SOURCES, already compiled position-independent), so that python/ufp4/ (ctypes) can load
# the library from a build tree.
set(ufp4_shared_objs "")
foreach(layer ${UFP4_LAYERS})
  list(APPEND ufp4_shared_objs $<TARGET_OBJECTS:ufp4_${layer}_obj>)
endforeach()
add_library(ufp4_shared SHARED ${ufp4_shared_objs})
set_target_properties(ufp4_shared PROPERTIES OUTPUT_NAME ufp4 LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR})
target_link_libraries(ufp4_shared PRIVATE OpenMP::OpenMP_C PkgConfig::CJSON PkgConfig::OPENBLAS m)
if(UFP4_DIST_MPI)
  target_link_libraries(ufp4_shared PRIVATE MPI::MPI_C)
endif()
