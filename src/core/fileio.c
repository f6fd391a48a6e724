#include "ufp4/fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ufp4/error.h"

static _Thread_local ufp4_io_fault fault;

void ufp4_io_test_fault(ufp4_io_fault f) { fault = f; }

static int write_all(int fd, const void *data, size_t size) {
  const char *p = data;
  if (fault == UFP4_IO_FAULT_WRITE) {
    if (write(fd, p, size / 2) >= 0) errno = ENOSPC;
    return -1;
  }
  while (size > 0) {
    ssize_t w = write(fd, p, size);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (w == 0) { /* no progress and no error: do not spin */
      errno = EIO;
      return -1;
    }
    p += w;
    size -= (size_t)w;
  }
  return 0;
}

static int sync_dir_raw(const char *dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY);
  if (fd < 0) return -1;
  int rc = fsync(fd);
  int saved = errno;
  close(fd);
  errno = saved;
  return rc < 0 && errno != EINVAL ? -1 : 0;
}

/* The folder holding `path` ("." for a bare name, "/" for a top-level one). */
static void parent_of(const char *path, char *dir, size_t cap) {
  snprintf(dir, cap, "%s", path);
  char *slash = strrchr(dir, '/');
  while (slash && slash > dir && slash[1] == '\0') { /* "a/b/" names b */
    *slash = '\0';
    slash = strrchr(dir, '/');
  }
  if (!slash) snprintf(dir, cap, ".");
  else if (slash == dir) dir[1] = '\0';
  else *slash = '\0';
}

/* fsync of the folder holding `path`, so the rename itself survives a crash. */
static int sync_parent(const char *path) {
  char dir[4096];
  parent_of(path, dir, sizeof dir);
  return sync_dir_raw(dir);
}

int ufp4_fsync_dir(const char *dir) {
  return sync_dir_raw(dir) ? ufp4_fail(UFP4_EIO, "%s: fsync of the folder failed: %s", dir, strerror(errno)) : 0;
}

int ufp4_fsync_parent(const char *path) {
  char dir[4096];
  parent_of(path, dir, sizeof dir);
  return ufp4_fsync_dir(dir);
}

int ufp4_atomic_open(ufp4_atomic_file *a, const char *path) {
  a->fd = -1;
  a->tmp[0] = '\0';
  if (snprintf(a->path, sizeof a->path, "%s", path) >= (int)sizeof a->path)
    return ufp4_fail(UFP4_EIO, "%s: path too long", path);
  snprintf(a->tmp, sizeof a->tmp, "%s.tmp.XXXXXX", a->path);
  a->fd = mkstemp(a->tmp);
  if (a->fd < 0) {
    a->tmp[0] = '\0';
    return ufp4_fail(UFP4_EIO, "%s: cannot create a temporary file: %s", path, strerror(errno));
  }
  return 0;
}

/* Reports a failed step; the caller's abort (or commit itself) removes the temporary. */
static int step_failed(const ufp4_atomic_file *a, const char *stage, int err) {
  return ufp4_fail(UFP4_EIO, "%s: %s failed: %s (nothing was replaced)", a->path, stage, strerror(err));
}

int ufp4_atomic_write(ufp4_atomic_file *a, const void *data, size_t size) {
  return write_all(a->fd, data, size) ? step_failed(a, "write", errno) : 0;
}

void ufp4_atomic_abort(ufp4_atomic_file *a) {
  int saved = errno;
  if (a->fd >= 0) close(a->fd);
  a->fd = -1;
  if (a->tmp[0]) unlink(a->tmp);
  a->tmp[0] = '\0';
  errno = saved;
}

static int sync_file(int fd) {
  if (fault != UFP4_IO_FAULT_FSYNC) return fsync(fd);
  errno = EIO;
  return -1;
}

static int rename_file(const char *from, const char *to) {
  if (fault != UFP4_IO_FAULT_RENAME) return rename(from, to);
  errno = EACCES;
  return -1;
}

int ufp4_atomic_commit(ufp4_atomic_file *a) {
  const char *stage = "fchmod";
  int rc = fchmod(a->fd, 0644) != 0;
  if (!rc) {
    stage = "fsync";
    rc = sync_file(a->fd) != 0;
  }
  if (!rc) {
    stage = "close";
    rc = close(a->fd) != 0;
    a->fd = -1;
  }
  if (!rc) {
    stage = "rename";
    rc = rename_file(a->tmp, a->path) != 0;
  }
  if (rc) {
    int saved = errno;
    ufp4_atomic_abort(a);
    return step_failed(a, stage, saved);
  }
  a->tmp[0] = '\0';
  if (sync_parent(a->path))
    return ufp4_fail(UFP4_EIO, "%s: written, but the fsync of its folder failed: %s", a->path,
                     strerror(errno));
  return 0;
}

int ufp4_write_parts_atomic(const char *path, const void *const *parts, const size_t *sizes, size_t n_parts) {
  ufp4_atomic_file a;
  int rc = ufp4_atomic_open(&a, path);
  for (size_t i = 0; !rc && i < n_parts; i++) rc = ufp4_atomic_write(&a, parts[i], sizes[i]);
  if (rc) {
    ufp4_atomic_abort(&a);
    return rc;
  }
  return ufp4_atomic_commit(&a);
}

int ufp4_write_file_atomic(const char *path, const void *data, size_t size) {
  return ufp4_write_parts_atomic(path, &data, &size, 1);
}

int ufp4_read_file(const char *path, size_t max_size, char **data, size_t *size) {
  *data = NULL;
  *size = 0;
  FILE *f = fopen(path, "rb");
  if (!f) return ufp4_fail(UFP4_EIO, "%s: cannot open: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode)) {
    fclose(f);
    return ufp4_fail(UFP4_EIO, "%s: not a regular file", path);
  }
  if ((unsigned long long)st.st_size > max_size) {
    fclose(f);
    return ufp4_fail(UFP4_EFORMAT, "%s: %lld bytes, more than the %zu allowed", path, (long long)st.st_size, max_size);
  }
  size_t n = (size_t)st.st_size;
  char *buf = malloc(n + 1);
  if (!buf) {
    fclose(f);
    return ufp4_fail(UFP4_ENOMEM, "%s: out of memory for %zu bytes", path, n);
  }
  size_t got = fread(buf, 1, n, f);
  int err = ferror(f);
  fclose(f);
  if (err || got != n) {
    free(buf);
    return ufp4_fail(UFP4_EIO, "%s: read %zu of %zu bytes", path, got, n);
  }
  buf[n] = '\0';
  *data = buf;
  *size = n;
  return 0;
}

int ufp4_mkdirs(const char *path) {
  char buf[4096];
  if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return ufp4_fail(UFP4_EIO, "%s: path too long", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    if (mkdir(buf, 0755) && errno != EEXIST) return ufp4_fail(UFP4_EIO, "%s: cannot create: %s", buf, strerror(errno));
    *p = '/';
  }
  if (mkdir(buf, 0755) && errno != EEXIST) return ufp4_fail(UFP4_EIO, "%s: cannot create: %s", buf, strerror(errno));
  struct stat st;
  if (stat(buf, &st) || !S_ISDIR(st.st_mode)) return ufp4_fail(UFP4_EIO, "%s: exists and is not a folder", buf);
  return 0;
}

int ufp4_remove_tree(const char *path) {
  struct stat st;
  if (lstat(path, &st)) return errno == ENOENT ? 0 : ufp4_fail(UFP4_EIO, "%s: %s", path, strerror(errno));
  if (!S_ISDIR(st.st_mode)) return unlink(path) ? ufp4_fail(UFP4_EIO, "%s: cannot remove: %s", path, strerror(errno)) : 0;
  DIR *d = opendir(path);
  if (!d) return ufp4_fail(UFP4_EIO, "%s: cannot open: %s", path, strerror(errno));
  struct dirent *e;
  int rc = 0;
  while (!rc && (e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char child[4096];
    if (snprintf(child, sizeof child, "%s/%s", path, e->d_name) >= (int)sizeof child)
      rc = ufp4_fail(UFP4_EIO, "%s: path too long", path);
    else rc = ufp4_remove_tree(child);
  }
  closedir(d);
  if (!rc && rmdir(path)) rc = ufp4_fail(UFP4_EIO, "%s: cannot remove: %s", path, strerror(errno));
  return rc;
}
