/*
 * backoff_test.c — unit test of mlplat_backoff_delay_ms (no PostgreSQL; TAP).
 *
 *   cc -Iinclude -o backoff_test test/unit/backoff_test.c src/http/backoff.c && ./backoff_test
 */
#include <inttypes.h>
#include <stdio.h>

#include "mlplat/backoff.h"

static int n_tests = 0;
static int n_failed = 0;

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
	int a;
	uint64_t seed;
	int in_range = 1;
	int capped = 1;
	int monotone_ceiling = 1;
	int spread = 0;
	int64_t first = -1;

	ok(mlplat_backoff_delay_ms(0, 100, 10000, 0, 1) == 0, "no failure yet: no delay");
	ok(mlplat_backoff_delay_ms(-5, 100, 10000, 0, 1) == 0, "negative attempts: no delay");
	ok(mlplat_backoff_delay_ms(1, 100, 10000, 0, 1) == 100, "first retry waits exactly base (ceiling = base)");

	/* every delay lies in [base, min(max, base*2^(a-1))] */
	for (seed = 0; seed < 200; seed++)
		for (a = 1; a <= 40; a++)
		{
			int64_t d = mlplat_backoff_delay_ms(a, 100, 60000, 0, seed);
			int64_t ceil = a >= 20 ? 60000 : (100LL << (a - 1));

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
		   mlplat_backoff_delay_ms(1000000, 100, 60000, 0, 7) >= 100,
	   "attempts = 1e6 saturates at the cap");
	ok(mlplat_backoff_delay_ms(63, INT64_C(1) << 40, INT64_C(1) << 50, 0, 3) <= (INT64_C(1) << 50),
	   "large base and shift do not overflow");

	/* jitter: different seeds spread out, same seed is reproducible */
	for (seed = 0; seed < 50; seed++)
	{
		int64_t d = mlplat_backoff_delay_ms(8, 100, 60000, 0, seed);

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
		double prev = 0;

		for (a = 1; a <= 8; a++)
		{
			double sum = 0;

			for (seed = 0; seed < 1000; seed++)
				sum += (double) mlplat_backoff_delay_ms(a, 100, 1000000, 0, seed);
			if (sum / 1000 < prev)
				monotone_ceiling = 0;
			prev = sum / 1000;
		}
	}
	ok(monotone_ceiling, "mean delay grows with attempts");

	/* Retry-After: at least what the peer asked, plus jitter */
	{
		int64_t d = mlplat_backoff_delay_ms(1, 100, 10000, 30, 1);

		ok(d >= 30000 && d <= 45000, "Retry-After raises the delay, even above max_ms (30 s + up to 15 s jitter)");
	}
	ok(mlplat_backoff_delay_ms(30, 100, 600000, 1, 1) >= 1000, "a small Retry-After never shortens a longer backoff");
	{
		int64_t d = mlplat_backoff_delay_ms(0, 100, 10000, 5, 1);

		ok(d >= 5000 && d <= 10000, "Retry-After applies even before any failure count (5 s + up to 5 s)");
	}
	/* the per-entity cap: mlplat.retry_after_max (default 10 min) */
	{
		int64_t d = mlplat_backoff_delay_ms(1, 100, 10000, 2000000000, 1);

		ok(d >= 600000 && d <= 900000, "absurd Retry-After is clamped to mlplat.retry_after_max (+ jitter)");
		mlplat_retry_after_max_ms = 20000;
		d = mlplat_backoff_delay_ms(1, 100, 10000, 7200, 1);
		ok(d >= 20000 && d <= 25000, "a lower mlplat.retry_after_max clamps a 2 h Retry-After to 20 s (+ up to 5 s)");
		mlplat_retry_after_max_ms = 600000;
	}
	/*
	 * Finding 15: 10,000 entities answered "Retry-After: 30" in the same second
	 * must not all come back in one second.  Delays (seeded by entity id, as
	 * the reconcilers seed them) all fall in [30 s, 45 s]; they cover every
	 * second of that window, and no second gets more than twice its share.
	 */
	{
		int per_second[16] = { 0 };
		int out_of_window = 0,
			busiest = 0,
			empty = 0;

		for (seed = 1; seed <= 10000; seed++)
		{
			int64_t d = mlplat_backoff_delay_ms(3, 500, 300000, 30, seed);

			if (d < 30000 || d > 45000)
				out_of_window++;
			else
				per_second[(d - 30000) / 1000]++;
		}
		for (a = 0; a < 15; a++)
		{
			if (per_second[a] > busiest)
				busiest = per_second[a];
			if (per_second[a] == 0)
				empty++;
		}
		ok(out_of_window == 0, "10,000 entities after Retry-After: 30 all wait 30 to 45 s");
		ok(empty == 0 && busiest <= 2 * 10000 / 15,
		   "... spread over all 15 seconds, the busiest second has at most twice its share");
		printf("# busiest second: %d of 10000 (even share %d)\n", busiest, 10000 / 15);
	}
	ok(mlplat_backoff_delay_ms(1, 100, 10000, -3, 1) == 100, "negative Retry-After is ignored");

	/* degenerate parameters */
	ok(mlplat_backoff_delay_ms(5, 0, 0, 0, 1) == 1, "base and max <= 0 behave as 1 ms");
	ok(mlplat_backoff_delay_ms(5, 500, 100, 0, 1) == 500, "max below base behaves as base");

	printf("1..%d\n", n_tests);
	return n_failed ? 1 : 0;
}
