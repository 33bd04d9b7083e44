/*
 * buf.h — growable output buffer in an MlJsonArena (internal to src/json).
 */
#ifndef MLPLAT_JSON_BUF_H
#define MLPLAT_JSON_BUF_H

#include <stdbool.h>
#include <stddef.h>

#include "mlplat/json.h"

typedef struct MlJsonBuf
{
	MlJsonArena *arena;
	char *data; /* always NUL-terminated once anything is written */
	size_t len;
	size_t cap;
	bool oom; /* sticky: an allocation failed */
} MlJsonBuf;

extern void ml_buf_init(MlJsonBuf *b, MlJsonArena *arena);
extern void ml_buf_append(MlJsonBuf *b, const char *s, size_t n);
extern void ml_buf_putc(MlJsonBuf *b, char c);
extern void ml_buf_puts(MlJsonBuf *b, const char *s);

/* Append v canonically; false on a non-finite number (err set) or OOM. */
extern bool ml_buf_canonical(MlJsonBuf *b, const MlJsonValue *v, MlJsonError *err);

/* Append s as a canonical JSON string literal. */
extern void ml_buf_json_string(MlJsonBuf *b, const char *s, size_t n);

#endif /* MLPLAT_JSON_BUF_H */
