/*
 * backoff.h — retry delays for reconcilers (pure; no PostgreSQL dependency).
 *
 * The HTTP client never retries by itself: each reconciler persists per-entity
 * attempts and next_attempt_at in its table, and asks this function how long to
 * wait before the next attempt.
 */
#ifndef MLPLAT_BACKOFF_H
#define MLPLAT_BACKOFF_H

#include <stdint.h>

/* Retry-After values above this are clamped (a broken header must not park an
 * entity for days); mlplat.retry_after_max may clamp lower. */
#define MLPLAT_BACKOFF_RETRY_AFTER_MAX_MS ((int64_t) 3600 * 1000)

/*
 * Jitter added on top of a Retry-After: uniform in [0, max(RA / 2,
 * MLPLAT_BACKOFF_RETRY_AFTER_SPREAD_MS)], so entities refused together (one
 * overloaded peer answering 429 to 10,000 of them) come back spread over at
 * least this long instead of in the same second.
 */
#define MLPLAT_BACKOFF_RETRY_AFTER_SPREAD_MS ((int64_t) 5000)

/*
 * Per-entity cap on the wait a Retry-After can ask for, in ms (the setting
 * mlplat.retry_after_max; defined here so unit tests link without PostgreSQL).
 */
extern int mlplat_retry_after_max_ms;

/*
 * Delay in milliseconds before attempt number `attempts` + 1, after `attempts`
 * failures (attempts <= 0 means "no failure yet": 0).
 *
 * "Full jitter" on an exponential ceiling: ceiling = min(max_ms, base_ms *
 * 2^(attempts-1)); the delay is uniform in [min(base_ms, ceiling), ceiling],
 * drawn deterministically from jitter_seed and attempts (so callers can pass
 * the entity id and get spread-out but reproducible delays).  A positive
 * retry_after_s (the server's Retry-After or a 429) raises the delay to at least
 * that many seconds (capped at mlplat_retry_after_max_ms and
 * MLPLAT_BACKOFF_RETRY_AFTER_MAX_MS), even above max_ms, plus a jitter drawn
 * from the same seed (see MLPLAT_BACKOFF_RETRY_AFTER_SPREAD_MS): never earlier
 * than the capped Retry-After, at most 1.5 times it or 5 s after it.
 * Negative or zero base/max are treated as 1 ms and base respectively.
 */
extern int64_t mlplat_backoff_delay_ms(int attempts, int64_t base_ms, int64_t max_ms,
									   int retry_after_s, uint64_t jitter_seed);

#endif /* MLPLAT_BACKOFF_H */
