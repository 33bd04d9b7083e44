/*
 * fuzz_prometheus.c — libFuzzer target for reading Prometheus instant-query
 * answers (src/rollout/prometheus.c), the rollouts reconciler's only source of
 * request evidence.
 *
 * Input: 2 bytes HTTP status (big-endian, mod 600; 0 means no answer), the
 * rest is the body.
 *
 * Properties: never crash; a value only with a finite, non-NaN number and an
 * empty reason; anything else has a reason (NUL-terminated inside its
 * buffer); no answer is an error; the same input gives the same result.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlplat/json.h"
#include "mlplat/prometheus.h"
#include "props.h"

static void
classify(int status, const char *body, size_t len, MlPromResult *out)
{
	MlJsonArena *a = ml_json_arena_new();

	if (a == NULL)
		abort();
	(void) ml_prom_parse_instant(a, status, body, len, out);
	ml_json_arena_free(a);
}

static const char *
check(const uint8_t *data, size_t size)
{
	int status;
	char *body;
	size_t blen;
	MlPromResult r1,
		r2;
	const char *bad = NULL;

	if (size < 2)
		return NULL;
	status = ((data[0] << 8) | data[1]) % 600;
	blen = size - 2;
	/* a private copy, NUL-terminated like a response body, so overreads show */
	body = malloc(blen + 1);
	if (body == NULL)
		abort();
	memcpy(body, data + 2, blen);
	body[blen] = '\0';
	classify(status, status ? body : NULL, blen, &r1);
	classify(status, status ? body : NULL, blen, &r2);

	if (r1.outcome != r2.outcome || strcmp(r1.why, r2.why) != 0 ||
		(r1.outcome == ML_PROM_VALUE && memcmp(&r1.value, &r2.value, sizeof(double)) != 0))
		bad = "the same answer was read differently";
	else if (memchr(r1.why, '\0', sizeof(r1.why)) == NULL)
		bad = "a reason that is not NUL-terminated";
	else if (r1.outcome == ML_PROM_VALUE && (!isfinite(r1.value) || r1.why[0] != '\0'))
		bad = "a value that is not a finite number, or a value with a reason";
	else if (r1.outcome != ML_PROM_VALUE && r1.why[0] == '\0')
		bad = "missing evidence without a reason";
	else if (status == 0 && r1.outcome != ML_PROM_ERROR)
		bad = "no answer was not an error";
	else if ((int) r1.outcome < ML_PROM_VALUE || (int) r1.outcome > ML_PROM_ERROR)
		bad = "an outcome out of range";
	free(body);
	return bad;
}

MLFUZZ_TARGET(check)
