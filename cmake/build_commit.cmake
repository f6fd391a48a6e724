# The git commit of the source tree, compiled into the library (src/core/build_info.c), so that run
# folders and reports can say which binary made them (`ufp4 compare` redoes a run made by another).
#
# The commit is read at every build, not only when CMake configures, so a build after a new commit
# or an edit never carries a stale name; the header is rewritten only when the name changed, so an
# unchanged tree rebuilds nothing. The name is `git describe --always --dirty --abbrev=12` of the
# source tree; when tracked files differ from the commit or untracked sources exist (under src,
# include, bench, cmake), "<hash>-dirty-<digest>", the digest (8 hex digits of a SHA-1) taken over
# `git diff HEAD` and those untracked files, so that two different edits never share a name. "unknown" when the source is not a git checkout of its own
# (a tarball, a copy without .git) or git is missing.
set(UFP4_GENERATED_DIR ${PROJECT_BINARY_DIR}/generated)
add_custom_target(ufp4_build_commit
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
          -DOUT=${UFP4_GENERATED_DIR}/ufp4_build_commit.h -P ${PROJECT_SOURCE_DIR}/cmake/build_commit_gen.cmake
  BYPRODUCTS ${UFP4_GENERATED_DIR}/ufp4_build_commit.h
  VERBATIM)
target_include_directories(ufp4_core_obj PRIVATE ${UFP4_GENERATED_DIR})
add_dependencies(ufp4_core_obj ufp4_build_commit)
