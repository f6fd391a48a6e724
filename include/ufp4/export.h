/* What the shared library exports.
 *
 * The library is compiled with -fvisibility=hidden (cmake/layers.cmake): a function is in
 * libufp4.so's dynamic symbol table only when it is declared between UFP4_API_BEGIN and
 * UFP4_API_END, which every header of include/ufp4/ puts around all of its declarations. So the
 * public API is exactly what include/ufp4/ declares, a function declared only in an internal
 * header (under src/) stays inside the library, and a declaration added to a public header is
 * exported without further marking. The test exported_symbols (tests/test_exported_symbols.py)
 * checks both directions on the built library.
 *
 * The pragma sets the visibility of the declarations that follow it, and a definition keeps the
 * visibility of its first declaration, so the .c files need no marking. Compilers without GCC's
 * visibility pragma (neither GCC nor Clang) get empty macros: every symbol is then visible, as
 * in a build without -fvisibility=hidden. */
#ifndef UFP4_EXPORT_H
#define UFP4_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define UFP4_API_BEGIN _Pragma("GCC visibility push(default)")
#define UFP4_API_END _Pragma("GCC visibility pop")
#else
#define UFP4_API_BEGIN
#define UFP4_API_END
#endif

#endif
