/* hash.c: streamed sha256 with OpenSSL's EVP interface. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "plcommon.h"

static void
hexify(const unsigned char *md, unsigned n, char *hex)
{
	static const char digits[] = "0123456789abcdef";
	for (unsigned i = 0; i < n; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 15];
	}
	hex[2 * n] = '\0';
}

void
plc_sha256_buf(const void *buf, size_t len, char hex[65])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned n = 0;
	EVP_Digest(buf, len, md, &n, EVP_sha256(), NULL);
	hexify(md, n, hex);
}

/* 1 MiB reads with posix_fadvise(SEQUENTIAL): as fast as sha256sum. */
int
plc_sha256_file(const char *path, char hex[65])
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd == -1)
		return -1;
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	size_t bufsz = 1 << 20;
	unsigned char *buf = malloc(bufsz);
	int rc = -1;
	if (ctx == NULL || buf == NULL || !EVP_DigestInit_ex(ctx, EVP_sha256(), NULL)) {
		errno = ENOMEM;
		goto out;
	}
	for (;;) {
		ssize_t n = read(fd, buf, bufsz);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			goto out;
		}
		if (n == 0)
			break;
		EVP_DigestUpdate(ctx, buf, (size_t)n);
	}
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	EVP_DigestFinal_ex(ctx, md, &mdlen);
	hexify(md, mdlen, hex);
	rc = 0;
out:
	{
		int save = errno;
		free(buf);
		EVP_MD_CTX_free(ctx);
		close(fd);
		errno = save;
	}
	return rc;
}

struct dlist {
	char **names;
	size_t n, cap;
};

static int
walk(const char *root, const char *rel, struct dlist *l)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s%s%s", root, *rel ? "/" : "", rel);
	DIR *d = opendir(path);
	if (d == NULL)
		return -1;
	struct dirent *de;
	int rc = 0;
	while ((de = readdir(d)) != NULL && rc == 0) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		char sub[4096], full[4096];
		snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "", de->d_name);
		snprintf(full, sizeof(full), "%s/%s", root, sub);
		struct stat st;
		if (lstat(full, &st) == -1) {
			rc = -1;
			break;
		}
		if (S_ISDIR(st.st_mode)) {
			rc = walk(root, sub, l);
		} else if (S_ISREG(st.st_mode)) {
			if (l->n == l->cap) {
				l->cap = l->cap ? 2 * l->cap : 64;
				char **nn = realloc(l->names, l->cap * sizeof(*nn));
				if (nn == NULL) {
					rc = -1;
					break;
				}
				l->names = nn;
			}
			if ((l->names[l->n++] = strdup(sub)) == NULL)
				rc = -1;
		}
	}
	closedir(d);
	return rc;
}

static int
cmpstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int
plc_sha256_dir(const char *path, char hex[65], uint64_t *bytes)
{
	struct dlist l = { 0 };
	int rc = -1;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	if (ctx == NULL || walk(path, "", &l) == -1)
		goto out;
	qsort(l.names, l.n, sizeof(*l.names), cmpstr);
	EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
	uint64_t total = 0;
	for (size_t i = 0; i < l.n; i++) {
		char full[4096], fh[65], line[4300];
		struct stat st;
		snprintf(full, sizeof(full), "%s/%s", path, l.names[i]);
		if (plc_sha256_file(full, fh) == -1 || stat(full, &st) == -1)
			goto out;
		total += (uint64_t)st.st_size;
		int n = snprintf(line, sizeof(line), "%s  %s\n", fh, l.names[i]);
		EVP_DigestUpdate(ctx, line, (size_t)n);
	}
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen = 0;
	EVP_DigestFinal_ex(ctx, md, &mdlen);
	hexify(md, mdlen, hex);
	if (bytes)
		*bytes = total;
	rc = 0;
out:
	for (size_t i = 0; i < l.n; i++)
		free(l.names[i]);
	free(l.names);
	EVP_MD_CTX_free(ctx);
	return rc;
}
