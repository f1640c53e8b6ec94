/* http.c: a small blocking libcurl client for the JSON services stages
 * talk to (Ollama, llama-server, vLLM). One easy handle per request, or one
 * kept across requests (plc_http_conn). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>

#include "plio.h"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void
curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

static size_t
on_body(char *ptr, size_t size, size_t nmemb, void *arg)
{
	struct plc_http_resp *r = arg;
	size_t n = size * nmemb;
	char *nb = realloc(r->body, r->len + n + 1);
	if (nb == NULL)
		return 0;
	r->body = nb;
	memcpy(r->body + r->len, ptr, n);
	r->len += n;
	r->body[r->len] = '\0';
	return n;
}

static int
perform(CURL *c, struct plc_http_resp *r, double timeout)
{
	char errbuf[CURL_ERROR_SIZE] = "";
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	if (timeout > 0)
		curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(timeout * 1000));
	CURLcode cc = curl_easy_perform(c);
	/* errbuf ends with this call; a kept handle must not point at it. */
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, NULL);
	if (r->body == NULL)
		r->body = calloc(1, 1);
	if (cc != CURLE_OK) {
		snprintf(r->error, sizeof(r->error), "%s",
		    errbuf[0] ? errbuf : curl_easy_strerror(cc));
		r->status = 0;
		return -1;
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
	return 0;
}

struct plc_http_conn {
	CURL *c;
};

struct plc_http_conn *
plc_http_conn_new(void)
{
	struct plc_http_conn *k;

	pthread_once(&curl_once, curl_init_once);
	if ((k = calloc(1, sizeof(*k))) == NULL)
		return NULL;
	if ((k->c = curl_easy_init()) == NULL) {
		free(k);
		return NULL;
	}
	return k;
}

void
plc_http_conn_free(struct plc_http_conn *k)
{
	if (k == NULL)
		return;
	curl_easy_cleanup(k->c);
	free(k);
}

/* curl_easy_reset forgets the last request's options but keeps the live
 * connection, which the next request to the same host reuses. */
int
plc_http_conn_do(struct plc_http_conn *k, const char *method, const char *url,
    const void *body, size_t len, const char *content_type, double timeout,
    struct plc_http_resp *r)
{
	memset(r, 0, sizeof(*r));
	CURL *c = k->c;
	curl_easy_reset(c);
	struct curl_slist *h = NULL;
	char ct[256];
	snprintf(ct, sizeof(ct), "Content-Type: %s", content_type ? content_type : "application/json");
	h = curl_slist_append(h, ct);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	if (strcmp(method, "HEAD") == 0)
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	else if (strcmp(method, "GET") != 0)
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	if (body != NULL) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
	}
	int rc = perform(c, r, timeout);
	curl_slist_free_all(h);
	return rc;
}

int
plc_http(const char *method, const char *url, const void *body, size_t len,
    const char *content_type, double timeout, struct plc_http_resp *r)
{
	struct plc_http_conn *k = plc_http_conn_new();

	if (k == NULL) {
		memset(r, 0, sizeof(*r));
		snprintf(r->error, sizeof(r->error), "curl_easy_init failed");
		return -1;
	}
	int rc = plc_http_conn_do(k, method, url, body, len, content_type, timeout, r);
	plc_http_conn_free(k);
	return rc;
}

int
plc_http_post_file(const char *url, const char *path, double timeout,
    struct plc_http_resp *r)
{
	pthread_once(&curl_once, curl_init_once);
	memset(r, 0, sizeof(*r));
	FILE *f = plc_fopen_in(path);
	if (f == NULL) {
		snprintf(r->error, sizeof(r->error), "%s: %s", path, plc_open_strerror(errno));
		return -1;
	}
	struct stat st;
	fstat(fileno(f), &st);
	CURL *c = curl_easy_init();
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/octet-stream");
	h = curl_slist_append(h, "Expect:");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "POST");
	curl_easy_setopt(c, CURLOPT_READDATA, f);
	curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)st.st_size);
	int rc = perform(c, r, timeout);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	fclose(f);
	return rc;
}

void
plc_http_free(struct plc_http_resp *r)
{
	free(r->body);
	r->body = NULL;
	r->len = 0;
}
