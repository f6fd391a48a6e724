#include "core/build_info.h"

/* The only file that includes the generated header, so a new commit recompiles nothing else. */
#include "ufp4_build_commit.h"

const char *ufp4_build_commit(void) { return UFP4_BUILD_COMMIT; }
