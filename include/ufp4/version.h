/* The version of the ufp4 API and library.
 *
 * This header is the one place the version is declared: CMakeLists.txt reads the three numbers
 * below into project(VERSION), from which the shared library's SONAME (libufp4.so.MAJOR), the
 * pkg-config file and the CMake package version are made. Bump them here only.
 *
 * The macros describe the headers a program was compiled against; ufp4_version() and
 * ufp4_version_number() describe the library it runs with, so a program can check that the two
 * agree (for 0.x versions, MINOR changes may break the API; from 1.0 on only MAJOR does). */
#ifndef UFP4_VERSION_H
#define UFP4_VERSION_H

#include "ufp4/export.h"

#define UFP4_VERSION_MAJOR 0
#define UFP4_VERSION_MINOR 2
#define UFP4_VERSION_PATCH 0

/* MAJOR * 10000 + MINOR * 100 + PATCH, e.g. 100 for 0.1.0, for #if comparisons. */
#define UFP4_VERSION_NUMBER (UFP4_VERSION_MAJOR * 10000 + UFP4_VERSION_MINOR * 100 + UFP4_VERSION_PATCH)

#define UFP4_VERSION_STR_(a, b, c) #a "." #b "." #c
#define UFP4_VERSION_STR(a, b, c) UFP4_VERSION_STR_(a, b, c)
/* "MAJOR.MINOR.PATCH", e.g. "0.1.0". */
#define UFP4_VERSION UFP4_VERSION_STR(UFP4_VERSION_MAJOR, UFP4_VERSION_MINOR, UFP4_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif
UFP4_API_BEGIN

/* The library's version, "MAJOR.MINOR.PATCH" (static storage). */
const char *ufp4_version(void);
/* The library's UFP4_VERSION_NUMBER. */
int ufp4_version_number(void);

UFP4_API_END
#ifdef __cplusplus
}
#endif
#endif
