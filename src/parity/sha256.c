/* SHA-256 through OpenSSL's libcrypto (EVP), the implementation every Debian system already
 * carries, rather than a hand-written one: the kit's checksums must agree with sha256sum and
 * Python's hashlib, which a tested library guarantees. */
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>

#include "ufp4/error.h"
#include "ufp4/fileio.h"
#include "ufp4/golden.h"

int ufp4_sha256_hex(const void *data, size_t n, char hex[65]) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!hex || (!data && n)) return ufp4_fail(UFP4_EINVAL, "sha256: NULL argument");
  if (!EVP_Digest(data ? data : "", n, md, &len, EVP_sha256(), NULL) || len != 32)
    return ufp4_fail(UFP4_EINVAL, "sha256: libcrypto's EVP_Digest failed");
  for (unsigned i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", md[i]);
  return 0;
}

int ufp4_sha256_file(const char *path, char hex[65]) {
  char *data = NULL;
  size_t n = 0;
  /* The kit's files are a few kB each; 1 GiB bounds a mistaken path without limiting real use. */
  int rc = ufp4_read_file(path, (size_t)1 << 30, &data, &n);
  if (!rc) rc = ufp4_sha256_hex(data, n, hex);
  free(data);
  return rc;
}
