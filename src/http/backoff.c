/*
 * backoff.c — exponential backoff with full jitter, honouring Retry-After.
 *
 * Pure C with no PostgreSQL dependency so test/unit/backoff_test.c can link it
 * directly.  See include/mlplat/backoff.h for the contract.
 */
#include "mlplat/backoff.h"

int mlplat_retry_after_max_ms = 600000;

/* splitmix64: a small, well-mixed deterministic generator */
static uint64_t
mix64(uint64_t x)
{
	x += UINT64_C(0x9E3779B97F4A7C15);
	x = (x ^ (x >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
	x = (x ^ (x >> 27)) * UINT64_C(0x94D049BB133111EB);
	return x ^ (x >> 31);
}

int64_t
mlplat_backoff_delay_ms(int attempts, int64_t base_ms, int64_t max_ms,
						int retry_after_s, uint64_t jitter_seed)
{
	int64_t ceiling;
	int64_t floor_ms;
	int64_t delay;
	int shift;

	if (base_ms < 1)
		base_ms = 1;
	if (max_ms < base_ms)
		max_ms = base_ms;

	if (attempts <= 0)
		delay = 0;
	else
	{
		/* base * 2^(attempts-1), saturating at max_ms without overflow */
		shift = attempts - 1;
		if (shift >= 62 || base_ms > (max_ms >> shift))
			ceiling = max_ms;
		else
			ceiling = base_ms << shift;
		if (ceiling > max_ms)
			ceiling = max_ms;

		floor_ms = base_ms < ceiling ? base_ms : ceiling;
		delay = floor_ms + (int64_t) (mix64(jitter_seed ^ mix64((uint64_t) attempts)) %
									  (uint64_t) (ceiling - floor_ms + 1));
	}

	if (retry_after_s > 0)
	{
		int64_t ra = (int64_t) retry_after_s * 1000;
		int64_t cap = mlplat_retry_after_max_ms > 0 ? mlplat_retry_after_max_ms : 1;
		int64_t spread;

		if (cap > MLPLAT_BACKOFF_RETRY_AFTER_MAX_MS)
			cap = MLPLAT_BACKOFF_RETRY_AFTER_MAX_MS;
		if (ra > cap)
			ra = cap;
		/*
		 * Everyone told "come back in N s" at once would come back at once:
		 * spread them after N.  Seeded by the entity (and a different stream
		 * from the exponential jitter above), so reproducible per entity.
		 */
		spread = ra / 2 > MLPLAT_BACKOFF_RETRY_AFTER_SPREAD_MS ? ra / 2 : MLPLAT_BACKOFF_RETRY_AFTER_SPREAD_MS;
		ra += (int64_t) (mix64(~jitter_seed ^ mix64((uint64_t) attempts + UINT64_C(0x52415441))) %
						 (uint64_t) spread);
		if (ra > delay)
			delay = ra;
	}
	return delay;
}
