/*
 * backoff_test.c — unit test of mlplat_backoff_delay_ms (no PostgreSQL; TAP).
 *
 *   cc -Iinclude -o backoff_test test/unit/backoff_test.c src/http/backoff.c && ./backoff_test
 */
#include <inttypes.h>
#include <stdio.h>

#include "mlplat/backoff.h"

static int	n_tests = 0;
static int	n_failed = 0;

static void
ok(int cond, const char *what)
{
	n_tests++;
	if (!cond)
		n_failed++;
	printf("%sok %d - %s\n", cond ? "" : "not ", n_tests, what);
}

int
main(void)
{
	int			a;
	uint64_t	seed;
	int			in_range = 1;
	int			capped = 1;
	int			monotone_ceiling = 1;
	int			spread = 0;
	int64_t		first = -1;

	ok(mlplat_backoff_delay_ms(0, 100, 10000, 0, 1) == 0, "no failure yet: no delay");
	ok(mlplat_backoff_delay_ms(-5, 100, 10000, 0, 1) == 0, "negative attempts: no delay");
	ok(mlplat_backoff_delay_ms(1, 100, 10000, 0, 1) == 100, "first retry waits exactly base (ceiling = base)");

	/* every delay lies in [base, min(max, base*2^(a-1))] */
	for (seed = 0; seed < 200; seed++)
		for (a = 1; a <= 40; a++)
		{
			int64_t		d = mlplat_backoff_delay_ms(a, 100, 60000, 0, seed);
			int64_t		ceil = a >= 20 ? 60000 : (100LL << (a - 1));

			if (ceil > 60000)
				ceil = 60000;
			if (d < 100 || d > ceil)
				in_range = 0;
			if (d > 60000)
				capped = 0;
		}
	ok(in_range, "delay within [base, exponential ceiling] for 200 seeds x 40 attempts");
	ok(capped, "delay never exceeds max_ms");

	/* huge attempt counts saturate instead of overflowing */
	ok(mlplat_backoff_delay_ms(1000000, 100, 60000, 0, 7) <= 60000 &&
	   mlplat_backoff_delay_ms(1000000, 100, 60000, 0, 7) >= 100, "attempts = 1e6 saturates at the cap");
	ok(mlplat_backoff_delay_ms(63, INT64_C(1) << 40, INT64_C(1) << 50, 0, 3) <= (INT64_C(1) << 50),
	   "large base and shift do not overflow");

	/* jitter: different seeds spread out, same seed is reproducible */
	for (seed = 0; seed < 50; seed++)
	{
		int64_t		d = mlplat_backoff_delay_ms(8, 100, 60000, 0, seed);

		if (first < 0)
			first = d;
		else if (d != first)
			spread = 1;
	}
	ok(spread, "different seeds give different delays (jitter)");
	ok(mlplat_backoff_delay_ms(8, 100, 60000, 0, 42) == mlplat_backoff_delay_ms(8, 100, 60000, 0, 42),
	   "same seed and attempts give the same delay");

	/* mean grows with attempts until the cap */
	{
		double		prev = 0;

		for (a = 1; a <= 8; a++)
		{
			double		sum = 0;

			for (seed = 0; seed < 1000; seed++)
				sum += (double) mlplat_backoff_delay_ms(a, 100, 1000000, 0, seed);
			if (sum / 1000 < prev)
				monotone_ceiling = 0;
			prev = sum / 1000;
		}
	}
	ok(monotone_ceiling, "mean delay grows with attempts");

	/* Retry-After */
	ok(mlplat_backoff_delay_ms(1, 100, 10000, 30, 1) == 30000, "Retry-After raises the delay, even above max_ms");
	ok(mlplat_backoff_delay_ms(30, 100, 600000, 1, 1) >= 1000, "a small Retry-After never shortens a longer backoff");
	ok(mlplat_backoff_delay_ms(0, 100, 10000, 5, 1) == 5000, "Retry-After applies even before any failure count");
	ok(mlplat_backoff_delay_ms(1, 100, 10000, 2000000000, 1) == MLPLAT_BACKOFF_RETRY_AFTER_MAX_MS,
	   "absurd Retry-After is clamped");
	ok(mlplat_backoff_delay_ms(1, 100, 10000, -3, 1) == 100, "negative Retry-After is ignored");

	/* degenerate parameters */
	ok(mlplat_backoff_delay_ms(5, 0, 0, 0, 1) == 1, "base and max <= 0 behave as 1 ms");
	ok(mlplat_backoff_delay_ms(5, 500, 100, 0, 1) == 500, "max below base behaves as base");

	printf("1..%d\n", n_tests);
	return n_failed ? 1 : 0;
}
