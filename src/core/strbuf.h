/* A growing text buffer for writers that compose a whole file before writing it atomically
 * (report.md, report.html, sweep.md, ...). Internal to the library and the CLI.
 *
 * Start from `ufp4_strbuf b = {0};`. The text is always NUL-terminated once anything was added.
 * An allocation failure sets oom and drops all further text, so a writer appends without checking
 * and looks once, at ufp4_strbuf_write (which then fails with UFP4_ENOMEM naming the file). */
#ifndef UFP4_CORE_STRBUF_H
#define UFP4_CORE_STRBUF_H

#include <stddef.h>

typedef struct {
  char *s;
  size_t n, cap;
  int oom;
} ufp4_strbuf;

void ufp4_strbuf_puts(ufp4_strbuf *b, const char *s);
void ufp4_strbuf_printf(ufp4_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Writes the text to path atomically (ufp4_write_file_atomic) and frees the buffer, on success
 * and on failure alike. A ufp4 status. */
int ufp4_strbuf_write(ufp4_strbuf *b, const char *path);
void ufp4_strbuf_free(ufp4_strbuf *b);

#endif
