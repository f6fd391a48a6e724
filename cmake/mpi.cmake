# MPI data parallelism (docs/DISTRIBUTED.md). With UFP4_MPI=ON (the default) and an MPI found, the
# dist layer links MPI and src/dist/dist_mpi.c compiles its transport (UFP4_HAVE_MPI); otherwise
# ufp4 is the single-process build and dist.c answers world 1. Included after the layers are made.
option(UFP4_MPI "Build MPI data-parallel training when an MPI is found" ON)
if(UFP4_MPI)
  find_package(MPI COMPONENTS C)
  if(MPI_C_FOUND)
    target_link_libraries(ufp4_dist_obj PUBLIC MPI::MPI_C)
    target_compile_definitions(ufp4_dist_obj PRIVATE UFP4_HAVE_MPI=1)
    target_link_libraries(ufp4_dist PUBLIC MPI::MPI_C)
    if(TARGET ufp4_dist_linkcheck)
      target_link_libraries(ufp4_dist_linkcheck PRIVATE MPI::MPI_C)
    endif()
    set(UFP4_DIST_MPI ON)
    message(STATUS "ufp4: MPI data parallelism on (${MPI_C_LIBRARIES})")
  else()
    message(STATUS "ufp4: no MPI found; single-process build")
  endif()
else()
  message(STATUS "ufp4: UFP4_MPI=OFF; single-process build")
  # A build asked to leave MPI out (the sanitizer build) skips the multi-rank tests even under CI,
  # where a build that wanted MPI and lacks it fails them.
  add_compile_definitions(UFP4_MPI_DISABLED=1)
endif()
# The dist tests launch themselves and the CLI with this launcher (targets made after this point).
if(UFP4_MPI AND MPI_C_FOUND AND MPIEXEC_EXECUTABLE)
  add_compile_definitions(UFP4_MPIEXEC="${MPIEXEC_EXECUTABLE}")
endif()
