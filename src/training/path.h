/* Paths inside a run or checkpoint folder, built in one place so that none is ever cut short.
 *
 * A train_path holds PATH_MAX bytes, the operating system's own limit on a path: one that does
 * not fit could not be opened anyway. train_path_fmt fails with UFP4_EINVAL, naming the start of
 * the path, instead of truncating it into a different, valid-looking path. Internal to the
 * training layer (and its tests). */
#ifndef UFP4_TRAINING_PATH_H
#define UFP4_TRAINING_PATH_H

#include <limits.h>

typedef struct {
  char s[PATH_MAX];
} train_path;

/* printf into p->s; 0, or UFP4_EINVAL when the result would not fit (p->s is then ""). */
int train_path_fmt(train_path *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
