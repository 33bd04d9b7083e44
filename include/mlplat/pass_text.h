/*
 * pass_text.h — the texts a pass writes about a row: an optional text in the
 * JSON of its observations and outputs, a flat object of such texts, the line
 * naming what drifted.
 */
#ifndef MLPLAT_PASS_TEXT_H
#define MLPLAT_PASS_TEXT_H

#include "postgres.h"

#include "lib/stringinfo.h"

#include "mlplat/spec_diff.h"

/*
 * Append val as a JSON string, or null when it is NULL: the one spelling of
 * an optional text in the observations and outputs the kinds build.
 */
extern void mlplat_json_append_text(StringInfo s, const char *val);

/*
 * {"k1":v1,"k2":v2,...}: a JSON object of texts, each value written by
 * mlplat_json_append_text (NULL is null), from key-value pairs ended by a NULL
 * key; palloc'd.  The one writer of the flat objects the kinds send and keep (a
 * registry request's body, a write-back's observation, a workflow step), so that
 * none builds one by hand.
 */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((sentinel))
#endif
extern char *
mlplat_json_object(const char *key, ...);

/*
 * A short human line naming the drifted paths of a diff: the first five, and
 * how many more ("spec.a, spec.b and 3 more"); palloc'd.  Status reasons and
 * ledger notes of every kind that reports drift use it.
 */
extern char *mlplat_drift_paths_line(const MlSpecDiff *diff);

#endif /* MLPLAT_PASS_TEXT_H */
