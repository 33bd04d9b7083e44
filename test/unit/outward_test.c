/*
 * outward_test.c — unit test of what mlplat sends out or stores from outside
 * (issue 18, finding 9; TAP, no PostgreSQL):
 *   - ml_prom_revision_query: a KServe revision name taken from a status goes
 *     into PromQL only when it is a DNS label (a hostile name could close the
 *     label matcher and rewrite the query);
 *   - ml_utf8_clip and the Prometheus error line: remote error text is cut on a
 *     UTF-8 character boundary, never inside a character.
 *
 * Usage: outward_test [number of tests before these]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlplat/json.h"
#include "mlplat/prometheus.h"

#include "unit_tap.h"

/* Well-formed UTF-8 (RFC 3629) with no truncated sequence at the end. */
static int
utf8_valid(const char *s)
{
	const unsigned char *p = (const unsigned char *) s;

	while (*p)
	{
		int n = *p < 0x80 ? 1 : (*p & 0xE0) == 0xC0 ? 2
							: (*p & 0xF0) == 0xE0	? 3
							: (*p & 0xF8) == 0xF0	? 4
													: 0;

		if (n == 0)
			return 0;
		for (int i = 1; i < n; i++)
			if ((p[i] & 0xC0) != 0x80)
				return 0;
		p += n;
	}
	return 1;
}

static void
test_revision_query(void)
{
	char q[512];
	const char *hostile[] = {
		"web-predictor-00001\"} or vector(1) #",
		"web-predictor-00001\",namespace_name=~\".*",
		"Web-Predictor-00001",
		"web\npredictor",
		"-web",
		"web-",
		"",
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", /* 64 */
		NULL
	};

	ok(ml_prom_revision_query(ML_PROM_REQUESTS, "shop", "web-predictor-00001", 60000, q, sizeof(q)) &&
		   strcmp(q, "sum(increase(revision_request_count{namespace_name=\"shop\",revision_name=\"web-predictor-00001\"}[60000ms]))") == 0,
	   "a DNS-label revision name makes the request count query");
	ok(ml_prom_revision_query(ML_PROM_ERRORS, "shop", "web-predictor-00001", 1000, q, sizeof(q)) &&
		   strstr(q, "response_code_class=\"5xx\"") != NULL,
	   "the error count query");
	ok(ml_prom_revision_query(ML_PROM_P95, "shop", "web-predictor-00001", 1000, q, sizeof(q)) &&
		   strncmp(q, "histogram_quantile(0.95, ", 25) == 0,
	   "the p95 query");
	for (int i = 0; hostile[i]; i++)
	{
		char what[200];
		int refused = !ml_prom_revision_query(ML_PROM_REQUESTS, "shop", hostile[i], 1000, q, sizeof(q)) && q[0] == '\0';

		snprintf(what, sizeof(what), "a revision name that is no DNS label is refused (case %d)", i + 1);
		ok(refused, what);
	}
	ok(!ml_prom_revision_query(ML_PROM_REQUESTS, "shop\"}", "web-predictor-00001", 1000, q, sizeof(q)),
	   "a namespace that is no DNS label is refused");
	ok(!ml_prom_revision_query(ML_PROM_REQUESTS, "shop", NULL, 1000, q, sizeof(q)), "no revision name: refused");
	ok(!ml_prom_revision_query(ML_PROM_REQUESTS, "shop", "web-predictor-00001", 1000, q, 20) && q[0] == '\0',
	   "a buffer too small: refused, never a cut query");
}

static void
test_utf8_clip(void)
{
	const char *e = "ab\xC3\xA9"
					"cd";						   /* ab é cd */
	const char *euro = "\xE2\x82\xAC\xE2\x82\xAC"; /* €€ */
	const char *emoji = "x\xF0\x9F\x98\x80";	   /* x 😀 */

	ok(ml_utf8_clip(e, 6, 10) == 6, "text within the bound is kept whole");
	ok(ml_utf8_clip(e, 6, 3) == 2, "a cut inside a 2-byte character backs up to before it");
	ok(ml_utf8_clip(e, 6, 4) == 4, "a cut after a character keeps it");
	ok(ml_utf8_clip(euro, 6, 5) == 3, "a cut inside a 3-byte character backs up");
	ok(ml_utf8_clip(emoji, 5, 4) == 1 && ml_utf8_clip(emoji, 5, 2) == 1, "a cut inside a 4-byte character backs up");
	ok(ml_utf8_clip(euro, 6, 0) == 0, "a zero bound keeps nothing");
}

static void
test_prometheus_error_cut(void)
{
	MlJsonArena *arena = ml_json_arena_new();
	MlPromResult res;
	char body[1024];
	char msg[400];
	int all_valid = 1;

	/* the error text puts a 2-, 3- or 4-byte character across every cut position near 150 bytes */
	for (int pad = 140; pad < 156; pad++)
	{
		for (int kind = 0; kind < 3; kind++)
		{
			const char *ch = kind == 0 ? "\xC3\xA9" : kind == 1 ? "\xE2\x82\xAC"
																: "\xF0\x9F\x98\x80";

			memset(msg, 'x', pad);
			msg[pad] = '\0';
			for (int k = 0; k < 10; k++)
				strcat(msg, ch);
			snprintf(body, sizeof(body), "{\"status\":\"error\",\"errorType\":\"bad_data\",\"error\":\"%s\"}", msg);
			ml_prom_parse_instant(arena, 400, body, strlen(body), &res);
			if (res.outcome != ML_PROM_ERROR || !utf8_valid(res.why) || strncmp(res.why, "HTTP 400: bad_data: xxx", 23) != 0)
			{
				all_valid = 0;
				printf("# pad %d kind %d: %s\n", pad, kind, res.why);
			}
		}
	}
	ok(all_valid, "a Prometheus error line cut at its bound is valid UTF-8 wherever a character falls");
	memset(msg, 0, sizeof(msg));
	for (int k = 0; k < 40; k++)
		strcat(msg, "\xC3\xA9");
	snprintf(body, sizeof(body), "{\"status\":\"error\",\"errorType\":\"%s\",\"error\":\"e\"}", msg);
	ml_prom_parse_instant(arena, 422, body, strlen(body), &res);
	ok(utf8_valid(res.why) && strstr(res.why, ": e") != NULL, "a long non-ASCII errorType is cut on a boundary too");
	ml_json_arena_free(arena);
}

int
main(int argc, char **argv)
{
	unit_tap_begin(argc, argv);
	test_revision_query();
	test_utf8_clip();
	test_prometheus_error_cut();
	/* the plan line comes last (this output is appended to another TAP stream) */
	return unit_tap_end();
}
