/*
 * read.h — field readers of the rollout records (internal to src/rollout).
 *
 * Each reader validates one field's value (type, finiteness, range, form)
 * and, on a refusal, fills the MlRolloutError with the rule, the field's
 * path (parent + key), a message, and the rule's detail and hint.  They
 * return false on a refusal so callers can chain them with ||.  Both ways
 * of reading evidence (from a value tree, and from the fields a caller has
 * already found) go through these, so they refuse the same values with the
 * same words.
 */
#ifndef MLPLAT_ROLLOUT_READ_H
#define MLPLAT_ROLLOUT_READ_H

#include <stdbool.h>
#include <stdint.h>

#include "mlplat/json.h"
#include "mlplat/rollout.h"

typedef struct RoReader
{
	MlRolloutError *err;
	bool nomem;
} RoReader;

/* Fill *err with the rule's default detail and hint; always false. */
extern bool ro_error(MlRolloutError *err, const char *rule, const char *parent,
					 const char *key, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* Replace the detail of the error just set. */
extern void ro_detail(MlRolloutError *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* A number as canonical JSON writes it, or a time in seconds (for messages). */
typedef struct NumText
{
	char s[32];
} NumText;

extern NumText ro_num(double d);
extern NumText ro_secs(int64_t ms);

/*
 * obj must be an object whose keys are exactly `keys` (NULL-terminated, in
 * byte order): unknown keys are refused first, then missing ones.
 */
extern bool ro_check_keys(RoReader *r, const MlJsonValue *obj, const char *path,
						  const char *const *keys);

/* A finite number; `what` names the expected kind in messages. */
extern bool ro_number(RoReader *r, const MlJsonValue *v, const char *parent, const char *key,
					  const char *what, double *out);

/* A non-negative integer in [min, 2^53); _in looks key up in obj first. */
extern bool ro_count(RoReader *r, const MlJsonValue *v, const char *parent, const char *key,
					 int64_t min, int64_t *out);
extern bool ro_count_in(RoReader *r, const MlJsonValue *obj, const char *parent,
						const char *key, int64_t min, int64_t *out);

/* Evidence seconds in whole milliseconds, as integer ms; or null. */
extern bool ro_ms(RoReader *r, const MlJsonValue *v, const char *parent, const char *key,
				  int64_t *out);
extern bool ro_ms_or_null(RoReader *r, const MlJsonValue *v, const char *parent,
						  const char *key, bool *present, int64_t *out);

/* A number in [lo, hi] (lo exclusive when lo_open); _in looks key up in obj first. */
extern bool ro_ranged(RoReader *r, const MlJsonValue *v, const char *parent, const char *key,
					  double lo, bool lo_open, double hi, const char *range_text, double *out);
extern bool ro_ranged_in(RoReader *r, const MlJsonValue *obj, const char *parent,
						 const char *key, double lo, bool lo_open, double hi,
						 const char *range_text, double *out);

/* A name (1..253 bytes, no NUL); a "sha256:<64 hex>" digest; a 64-hex content id. */
extern bool ro_string(RoReader *r, const MlJsonValue *v, const char *parent, const char *key,
					  MlRolloutStr *out);
extern bool ro_digest(RoReader *r, const MlJsonValue *v, const char *parent, const char *key,
					  MlRolloutStr *out);
extern bool ro_content_id(RoReader *r, const MlJsonValue *v, const char *parent,
						  const char *key, char out[ML_CONTENT_ID_LEN + 1]);

#endif /* MLPLAT_ROLLOUT_READ_H */
