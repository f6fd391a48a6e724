#include "data/atomic_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ufp4/error.h"

int ufp4_atomic_open(ufp4_atomic_file *a, const char *path) {
  memset(a, 0, sizeof *a);
  size_t n = strlen(path);
  if (n + 1 > sizeof a->path) return ufp4_fail(UFP4_EINVAL, "%s: path too long", path);
  memcpy(a->path, path, n + 1);
  memcpy(a->tmp, path, n);
  memcpy(a->tmp + n, ".tmp.XXXXXX", sizeof ".tmp.XXXXXX");
  int fd = mkstemp(a->tmp);
  if (fd < 0) return ufp4_fail(UFP4_EIO, "%s: cannot create a temp file: %s", path, strerror(errno));
  a->f = fdopen(fd, "wb");
  if (!a->f) {
    close(fd);
    unlink(a->tmp);
    return ufp4_fail(UFP4_EIO, "%s: %s", path, strerror(errno));
  }
  return 0;
}

int ufp4_atomic_write(ufp4_atomic_file *a, const void *data, size_t n) {
  if (n && fwrite(data, 1, n, a->f) != n)
    return ufp4_fail(UFP4_EIO, "%s: write failed: %s", a->tmp, strerror(errno));
  return 0;
}

void ufp4_atomic_abort(ufp4_atomic_file *a) {
  if (a->f) fclose(a->f);
  a->f = NULL;
  if (a->tmp[0]) unlink(a->tmp);
  a->tmp[0] = 0;
}

int ufp4_atomic_commit(ufp4_atomic_file *a) {
  int rc = 0;
  if (fflush(a->f) || fsync(fileno(a->f)))
    rc = ufp4_fail(UFP4_EIO, "%s: flush/fsync failed: %s", a->tmp, strerror(errno));
  if (fclose(a->f) && !rc) rc = ufp4_fail(UFP4_EIO, "%s: close failed: %s", a->tmp, strerror(errno));
  a->f = NULL;
  if (!rc && rename(a->tmp, a->path))
    rc = ufp4_fail(UFP4_EIO, "%s: cannot rename the temp file into place: %s", a->path, strerror(errno));
  if (rc) {
    unlink(a->tmp);
    return rc;
  }
  /* make the rename itself durable */
  char dir[4096];
  memcpy(dir, a->path, sizeof dir);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = 0;
  int dfd = open(slash ? (dir[0] ? dir : "/") : ".", O_RDONLY);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  return 0;
}

int ufp4_data_write_atomic(const char *path, const void *data, size_t n) {
  ufp4_atomic_file a;
  int rc = ufp4_atomic_open(&a, path);
  if (rc) return rc;
  if ((rc = ufp4_atomic_write(&a, data, n))) {
    ufp4_atomic_abort(&a);
    return rc;
  }
  return ufp4_atomic_commit(&a);
}
