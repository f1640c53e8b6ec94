/*
 * test_strbuf.c: plugins/lib/io/strbuf.c and strmap.c, the bounded string
 * builder and the string hash map the daemon and the plugins share. The
 * builder: text that fits is kept whole; text that does not is cut with
 * "..." at its end, at a character's boundary, never past the buffer (a
 * guard after it stays untouched) for every capacity from 0 up and every
 * kind of append; appends after a cut do nothing. The map: puts, gets,
 * add's "added", growth past many keys, and an empty map's lookups.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plio.h"
#include "runner.h"

#define GUARD 0x5a

static void
case_fits(void)
{
	char buf[64];
	struct plc_sb sb;
	plc_sb_init(&sb, buf, sizeof(buf));
	CHECK(strcmp(buf, "") == 0 && sb.len == 0 && !sb.trunc);
	plc_sb_sep(&sb, ", ");
	plc_sb_append(&sb, "a");
	plc_sb_sep(&sb, ", ");
	plc_sb_appendf(&sb, "%s=%d", "b", 42);
	plc_sb_sep(&sb, ", ");
	plc_sb_appendn(&sb, "cdef", 1);
	CHECK(strcmp(buf, "a, b=42, c") == 0, "got \"%s\"", buf);
	CHECK(sb.len == strlen(buf) && !sb.trunc);
	/* Exactly full: five bytes and the NUL in six. */
	char six[6];
	plc_sb_init(&sb, six, sizeof(six));
	plc_sb_append(&sb, "hel");
	plc_sb_appendf(&sb, "%s", "lo");
	CHECK(strcmp(six, "hello") == 0 && !sb.trunc, "got \"%s\"", six);
}

static void
case_cut(void)
{
	char buf[8 + 4];
	struct plc_sb sb;
	memset(buf, GUARD, sizeof(buf));
	plc_sb_init(&sb, buf, 8);
	plc_sb_append(&sb, "abcdefgh");
	CHECK(strcmp(buf, "abcd...") == 0 && sb.trunc && sb.len == 7, "got \"%s\"", buf);
	for (int i = 8; i < 12; i++)
		CHECK((unsigned char)buf[i] == GUARD, "byte %d past the buffer written", i);
	/* Later appends do nothing. */
	plc_sb_append(&sb, "x");
	plc_sb_appendf(&sb, "%d", 7);
	plc_sb_sep(&sb, ", ");
	CHECK(strcmp(buf, "abcd...") == 0, "got \"%s\"", buf);
	/* A cut by appendf, and one that falls in text appended before. */
	plc_sb_init(&sb, buf, 8);
	plc_sb_appendf(&sb, "%d", 123456789);
	CHECK(strcmp(buf, "1234...") == 0, "got \"%s\"", buf);
	plc_sb_init(&sb, buf, 8);
	plc_sb_append(&sb, "abcdef");
	plc_sb_append(&sb, "gh");
	CHECK(strcmp(buf, "abcd...") == 0, "got \"%s\"", buf);
	/* UTF-8: "é" (2 bytes) is not split; the cut moves before it. */
	plc_sb_init(&sb, buf, 8);
	plc_sb_append(&sb, "abc\xc3\xa9xyz");
	CHECK(strcmp(buf, "abc...") == 0, "got \"%s\"", buf);
}

/* Every capacity from 0 to 40, every kind of append, random pieces: the
 * text is NUL-terminated inside the buffer, the guard after it intact,
 * and it is the whole text or a prefix of it ending in "...". */
static void
case_bounds(void)
{
	unsigned seed = 7;
	for (size_t cap = 0; cap <= 40; cap++)
		for (int round = 0; round < 200; round++) {
			char buf[48], want[512] = "";
			memset(buf, GUARD, sizeof(buf));
			struct plc_sb sb;
			plc_sb_init(&sb, buf, cap);
			int pieces = (int)(rand_r(&seed) % 6);
			for (int p = 0; p < pieces; p++) {
				char piece[24];
				int n = (int)(rand_r(&seed) % 20);
				for (int i = 0; i < n; i++)
					piece[i] = (char)('a' + rand_r(&seed) % 26);
				piece[n] = '\0';
				switch (rand_r(&seed) % 3) {
				case 0: plc_sb_append(&sb, piece); break;
				case 1: plc_sb_appendf(&sb, "%s", piece); break;
				default: plc_sb_appendn(&sb, piece, (size_t)n); break;
				}
				strcat(want, piece);
			}
			for (size_t i = cap; i < sizeof(buf); i++)
				CHECK((unsigned char)buf[i] == GUARD, "cap %zu: byte %zu written", cap, i);
			if (cap == 0)
				continue;
			CHECK(memchr(buf, '\0', cap) != NULL, "cap %zu: no NUL", cap);
			CHECK(strlen(buf) == sb.len);
			if (strlen(want) < cap) {
				CHECK(!sb.trunc && strcmp(buf, want) == 0, "cap %zu: \"%s\" for \"%s\"",
				    cap, buf, want);
			} else {
				size_t m = cap - 1 < 3 ? cap - 1 : 3;
				CHECK(sb.trunc && sb.len == cap - 1 &&
				    strncmp(buf + sb.len - m, "...", m) == 0 &&
				    strncmp(buf, want, sb.len - m) == 0,
				    "cap %zu: \"%s\" for \"%s\"", cap, buf, want);
			}
		}
}

static void
case_map(void)
{
	struct plc_strmap m = { 0 };
	CHECK(plc_strmap_get(&m, "x") == NULL);
	CHECK(plc_strmap_put(&m, "a", 1) == 0 && plc_strmap_put(&m, "b", 2) == 0);
	CHECK(plc_strmap_put(&m, "a", 3) == 0);
	CHECK(*plc_strmap_get(&m, "a") == 3 && *plc_strmap_get(&m, "b") == 2 && m.n == 2);
	int added = -1;
	int *v = plc_strmap_add(&m, "b", 9, &added);
	CHECK(v != NULL && *v == 2 && added == 0);
	v = plc_strmap_add(&m, "c", 9, &added);
	CHECK(v != NULL && *v == 9 && added == 1 && m.n == 3);
	CHECK(plc_strmap_get(&m, "") == NULL);
	CHECK(plc_strmap_put(&m, "", 5) == 0 && *plc_strmap_get(&m, "") == 5);
	/* Growth: 100,000 keys, each found with its value. */
	char k[32];
	for (int i = 0; i < 100000; i++) {
		snprintf(k, sizeof(k), "key%d", i);
		CHECK(plc_strmap_put(&m, k, i) == 0);
	}
	int bad = 0;
	for (int i = 0; i < 100000; i++) {
		snprintf(k, sizeof(k), "key%d", i);
		int *p = plc_strmap_get(&m, k);
		bad += p == NULL || *p != i;
	}
	CHECK(bad == 0, "%d keys lost", bad);
	CHECK(plc_strmap_get(&m, "key100000") == NULL && m.n == 100004 && 2 * m.n <= m.cap);
	plc_strmap_free(&m);
	CHECK(m.cap == 0 && m.n == 0 && plc_strmap_get(&m, "a") == NULL);
}

static const struct unit_case cases[] = {
	UNIT_CASE(fits),
	UNIT_CASE(cut),
	UNIT_CASE(bounds),
	UNIT_CASE(map),
	UNIT_END
};

int
main(int argc, char **argv)
{
	return unit_main(argc, argv, cases);
}
