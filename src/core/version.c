/* The runtime half of ufp4/version.h: the version this library was built as. */
#include "ufp4/version.h"

const char *ufp4_version(void) { return UFP4_VERSION; }

int ufp4_version_number(void) { return UFP4_VERSION_NUMBER; }
