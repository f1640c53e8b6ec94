/* strbuf.c: the bounded string builder (struct plc_sb, plio.h). Text is
 * appended into a buffer of fixed size the caller owns; what does not
 * fit is cut at a character's boundary and the text ends in "...", so a
 * long list reads as cut, never as whole, and nothing is written past the
 * buffer. It allocates nothing. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "plio.h"

void
plc_sb_init(struct plc_sb *sb, char *buf, size_t cap)
{
	sb->buf = buf;
	sb->cap = cap;
	sb->len = 0;
	sb->trunc = 0;
	if (cap > 0)
		buf[0] = '\0';
}

/* Cut the text so that the marker fits after it, back to the start of a
 * UTF-8 sequence, and end it with the marker (as much of it as fits in a
 * buffer smaller than the marker). */
static void
sb_cut(struct plc_sb *sb)
{
	size_t mlen = sizeof(PLC_SB_MORE) - 1;
	sb->trunc = 1;
	if (sb->cap == 0)
		return;
	size_t keep = sb->cap - 1 > mlen ? sb->cap - 1 - mlen : 0;
	if (keep > sb->len)
		keep = sb->len;
	while (keep > 0 && ((unsigned char)sb->buf[keep] & 0xc0) == 0x80)
		keep--;
	size_t m = sb->cap - 1 - keep < mlen ? sb->cap - 1 - keep : mlen;
	memcpy(sb->buf + keep, PLC_SB_MORE, m);
	sb->len = keep + m;
	sb->buf[sb->len] = '\0';
}

void
plc_sb_appendn(struct plc_sb *sb, const char *s, size_t n)
{
	if (sb->trunc || n == 0)
		return;
	if (sb->cap == 0 || n > sb->cap - 1 - sb->len) {
		/* Copy what fits, so the cut falls inside the new text. */
		size_t room = sb->cap ? sb->cap - 1 - sb->len : 0;
		memcpy(sb->buf + sb->len, s, room);
		sb->len += room;
		sb_cut(sb);
		return;
	}
	memcpy(sb->buf + sb->len, s, n);
	sb->len += n;
	sb->buf[sb->len] = '\0';
}

void
plc_sb_append(struct plc_sb *sb, const char *s)
{
	plc_sb_appendn(sb, s, strlen(s));
}

void
plc_sb_vappendf(struct plc_sb *sb, const char *fmt, va_list ap)
{
	if (sb->trunc)
		return;
	if (sb->cap == 0) {
		sb_cut(sb);
		return;
	}
	size_t room = sb->cap - sb->len;
	int n = vsnprintf(sb->buf + sb->len, room, fmt, ap);
	if (n < 0) {
		/* An encoding error: nothing of this piece is kept. */
		sb->buf[sb->len] = '\0';
		sb_cut(sb);
	} else if ((size_t)n >= room) {
		sb->len = sb->cap - 1;
		sb_cut(sb);
	} else {
		sb->len += (size_t)n;
	}
}

void
plc_sb_appendf(struct plc_sb *sb, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	plc_sb_vappendf(sb, fmt, ap);
	va_end(ap);
}

/* A separator before every piece but the first: lists ("a, b, c"). */
void
plc_sb_sep(struct plc_sb *sb, const char *sep)
{
	if (sb->len > 0)
		plc_sb_append(sb, sep);
}
