/*
 * prometheus.h — reading one answer of Prometheus's instant-query API
 * (GET /api/v1/query), pure: no PostgreSQL headers, no I/O.
 *
 * The rollouts reconciler asks for one number per query (a sum, a rate, a
 * quantile).  Anything that is not a finite number is missing evidence, never
 * zero: an error answer ({"status":"error","errorType":...,"error":...}), an
 * empty vector (no series matched, or too few samples in the range), NaN
 * (histogram_quantile over no requests) and ±Inf.  The caller turns missing
 * evidence into a HOLD; only numbers can show a regression.
 */
#ifndef MLPLAT_PROMETHEUS_H
#define MLPLAT_PROMETHEUS_H

#include <stdbool.h>
#include <stddef.h>

#include "mlplat/json.h"

typedef enum MlPromOutcome
{
	ML_PROM_VALUE = 0,			/* a finite number in value */
	ML_PROM_EMPTY,				/* success, but no sample */
	ML_PROM_NOT_FINITE,			/* NaN or ±Inf */
	ML_PROM_ERROR				/* an error answer, or not Prometheus's shape */
} MlPromOutcome;

typedef struct MlPromResult
{
	MlPromOutcome outcome;
	double		value;
	char		why[200];		/* for anything but ML_PROM_VALUE: one line */
} MlPromResult;

/*
 * Classify the body of an instant query answered with HTTP status http_status
 * (0: no response; then body may be NULL).  A vector must hold at most one
 * sample (queries aggregate with sum); scalars are accepted too.
 */
extern MlPromOutcome ml_prom_parse_instant(MlJsonArena *arena, int http_status, const char *body,
										   size_t len, MlPromResult *out);

/* "value", "empty", "not_finite", "error" */
extern const char *ml_prom_outcome_name(MlPromOutcome o);

#endif							/* MLPLAT_PROMETHEUS_H */
