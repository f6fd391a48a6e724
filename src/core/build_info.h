/* Which binary this is: the git commit its sources were built from (cmake/build_commit.cmake).
 * Internal to the library and the CLI. */
#ifndef UFP4_CORE_BUILD_INFO_H
#define UFP4_CORE_BUILD_INFO_H

/* `git describe --always --dirty` of the source tree at build time: a commit hash;
 * "<hash>-dirty-<digest>" when the tree had changes (the digest tells two edits apart, but such a
 * build cannot be rebuilt from its name); or "unknown" when the source was not a git checkout.
 * Only [A-Za-z0-9._+-]. */
const char *ufp4_build_commit(void);

#endif
