/*
 * spec_diff.h — default-aware comparison of desired and observed specs.
 *
 * Drift detection asks "would applying desired change anything we own?", not
 * "are the two documents equal?".  So:
 *   - only fields present in desired are compared; anything else in observed
 *     belongs to someone else (the API server's defaults, other managers);
 *   - a field absent (or null) in observed equals the value the server would
 *     default it to (a table of rules, see src/json/diff.c and docs/drift.md);
 *   - an absent list equals an empty list, an absent map an empty map;
 *   - numbers compare by value as doubles, like the canonical form (1 == 1.0);
 *   - Kubernetes quantities compare by value ("1" == 1 == "1000m",
 *     "1Gi" == "1073741824", "500m" == 0.5);
 *   - lists Kubernetes merges by key (env and containers by name, ports by
 *     containerPort, ...) are matched by key, not by position; observed
 *     entries whose key desired does not name are not ours.
 *
 * Pure and I/O-free; no PostgreSQL headers.
 */
#ifndef MLPLAT_SPEC_DIFF_H
#define MLPLAT_SPEC_DIFF_H

#include <stdbool.h>
#include <stddef.h>

#include "mlplat/json.h"

typedef struct MlSpecDiffEntry
{
	const char *path; /* e.g. spec.predictor.model.env[name=TOKEN].valueFrom */
	const MlJsonValue *desired;
	const MlJsonValue *observed; /* NULL when absent in observed */
} MlSpecDiffEntry;

typedef struct MlSpecDiff
{
	MlSpecDiffEntry *entries; /* sorted by path (bytewise) */
	size_t count;
} MlSpecDiff;

/* Bound on the total bytes of all reported paths (ML_JSON_ERR_LIMIT beyond). */
#define ML_SPEC_DIFF_MAX_PATH_BYTES (64 * 1024 * 1024)

/*
 * Compare desired with observed.  Returns false (err set) only when out of
 * memory or when the paths would exceed ML_SPEC_DIFF_MAX_PATH_BYTES; *out is
 * filled in arena.  desired must not be NULL; observed may be NULL (nothing
 * observed).
 */
extern bool ml_spec_diff(MlJsonArena *arena, const MlJsonValue *desired,
						 const MlJsonValue *observed, MlSpecDiff *out, MlJsonError *err);

/*
 * The diff as JSON text, NUL-terminated, in arena:
 *   [{"path":"a.b","desired":5,"observed":10}, ...]
 * "observed" is left out when the field is absent in observed.
 * Values are written canonically.
 */
extern char *ml_spec_diff_to_json(MlJsonArena *arena, const MlSpecDiff *diff,
								  size_t *len_out, MlJsonError *err);

/*
 * Kubernetes resource.Quantity equality by value: "1" == "1000m" == 1,
 * "1Gi" == "1073741824", "500m" == 0.5.  *ok is false when either side is
 * not a quantity (a string or number in the quantity grammar).
 */
extern bool ml_quantity_equal(const MlJsonValue *a, const MlJsonValue *b, bool *ok);

/* Equality of two JSON numbers as IEEE 754 doubles, like the canonical form (1 == 1.0 == 10e-1). */
extern bool ml_json_number_equal(const MlJsonValue *a, const MlJsonValue *b);

#endif /* MLPLAT_SPEC_DIFF_H */
