/*
 * fuzz_rollout_decide.c — libFuzzer target for the rollouts reconciler's pure
 * decision (src/reconcile/rollout_decide.c).
 *
 * Input: byte 0 the claimed status, 1 the request, 2 flags (settled, window
 * started, decide_at set, metrics gathered), 3 the window seconds, 4-5 how
 * far decide_at is from the observation, 6-9 which of four names (or none)
 * are the stored target and previous names, the latest created and the
 * rolled-out revision, 10 the number of traffic entries (at most 6), then
 * two bytes per entry (a name, a percent); the rest is the fraction's text.
 *
 * Property (mlfuzz_check_rollout_decide, also run by
 * test/unit/rollout_decide_test.c): never crash; the same input decides the
 * same; the want percent follows the status and request; names once stored
 * stay; the traffic shares are what the entries give; KServe not settled or
 * no target name waits; a close is on a revision seen at 100%, PROMOTED
 * exactly when not rolling back; a decision comes only on the split wanted;
 * a window starts at the observation; every text is NUL-terminated and
 * non-empty where one is written; ml_rollout_after_plan agrees with the
 * decision it is given.
 *
 * Built with -DMLPLAT_NO_FUZZ_MAIN the file provides only the property
 * (MLFUZZ_TARGET in props.h).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlplat/rollout_decide.h"
#include "props.h"

const char *mlfuzz_check_rollout_decide(const uint8_t *data, size_t size);

static const char *const names[] = { "scorer-00001", "scorer-00002", "scorer-00003", "x", NULL };

#define NAME(b) names[(b) % 5]
#define MAX_TRAFFIC 6

static bool
same(const char *a, const char *b)
{
	return a != NULL && b != NULL && strcmp(a, b) == 0;
}

static const char *
check_decision(const MlRolloutPassIn *in, const MlRolloutPassDecision *d)
{
	int t = 0,
		p = 0;

	if (d->want_percent < -1 || d->want_percent > 100)
		return "a want percent out of range";
	if (in->status == MLPLAT_ROLLOUT_ROLLING_BACK ? d->want_percent != 0
												  : (in->request == ML_ROLLOUT_REQUEST_PROMOTE) != (d->want_percent < 0))
		return "a want percent that does not follow status and request";
	if ((in->target_kn && d->target_kn != in->target_kn) || (in->previous_kn && d->previous_kn != in->previous_kn))
		return "a stored name that did not stay";
	if (!in->previous_kn && d->previous_kn && same(d->previous_kn, d->target_kn))
		return "the target taken as the previous revision";
	for (size_t i = 0; i < in->ntraffic; i++)
	{
		t += same(in->traffic[i].revision, d->target_kn) ? in->traffic[i].percent : 0;
		p += same(in->traffic[i].revision, d->previous_kn) ? in->traffic[i].percent : 0;
	}
	if (t != d->target_percent || p != d->previous_percent)
		return "traffic shares that are not the entries'";
	if ((d->step == ML_ROLLOUT_STEP_WAIT) != (!in->settled || d->target_kn == NULL))
		return "waiting when settled with a target, or not waiting when not";
	if (memchr(d->status_reason, '\0', sizeof(d->status_reason)) == NULL)
		return "a status reason that is not NUL-terminated";
	switch (d->step)
	{
		case ML_ROLLOUT_STEP_CLOSE:
			if (d->close_kn == NULL || (d->close_kn == d->target_kn ? t : p) != 100)
				return "a close on a revision not seen at 100%";
			if ((d->close_status == MLPLAT_ROLLOUT_PROMOTED) != (in->status != MLPLAT_ROLLOUT_ROLLING_BACK))
				return "PROMOTED when rolling back, or no promotion otherwise";
			break;
		case ML_ROLLOUT_STEP_REASON:
		case ML_ROLLOUT_STEP_START:
			if (d->status_reason[0] == '\0')
				return "a reason step without a reason";
			break;
		case ML_ROLLOUT_STEP_DECIDE:
			if (in->status == MLPLAT_ROLLOUT_ROLLING_BACK || in->request == ML_ROLLOUT_REQUEST_PROMOTE ||
				d->target_percent != d->want_percent)
				return "a decision off the split wanted";
			break;
		default:
			break;
	}
	if (d->start_window && (d->window_start_ms != in->observed_at_ms || d->decide_at_ms < d->window_start_ms ||
							in->window_started))
		return "a window started elsewhere than at the observation";
	return NULL;
}

static const char *
check_after_plan(const uint8_t *data, size_t size, const MlRolloutPassIn *in)
{
	static const char *const decisions[] = { "ADVANCE", "HOLD", "ROLLBACK", "PAUSE" };
	static const char *const reasons[] = { "AT_CEILING", "TRAFFIC_COMPLETE", "WINDOW_INCOMPLETE", "P95_MISSING" };
	const char *decision = decisions[size % 4];
	const char *given[4];
	size_t n = 0;
	MlRolloutAfterPlan a;
	bool ceiling = false;

	for (size_t i = 0; i < 4 && i < size; i++)
	{
		given[n++] = reasons[data[i] % 4];
		ceiling |= data[i] % 4 < 2;
	}
	if (!ml_rollout_after_plan(decision, given, n, in->window_seconds, in->observed_at_ms, &a))
		return strcmp(decision, "PAUSE") == 0 ? NULL : "a decision of the three refused";
	if (strcmp(decision, "PAUSE") == 0)
		return "a decision that is none of the three taken";
	if (memchr(a.status_reason, '\0', sizeof(a.status_reason)) == NULL ||
		strncmp(a.status_reason, decision, strlen(decision)) != 0)
		return "a status reason that does not start with the decision";
	if (a.keep_window != (strcmp(decision, "HOLD") == 0))
		return "a window kept after a move, or ended by a hold";
	if (a.keep_window && (a.decide_at_ms <= in->observed_at_ms ||
						  a.status != (ceiling ? MLPLAT_ROLLOUT_AT_CEILING : MLPLAT_ROLLOUT_HOLDING)))
		return "a hold without a later look, or with the wrong status";
	return NULL;
}

const char *
mlfuzz_check_rollout_decide(const uint8_t *data, size_t size)
{
	MlRolloutTraffic traffic[MAX_TRAFFIC];
	MlRolloutPassIn in;
	MlRolloutPassDecision d1,
		d2;
	char *fraction;
	size_t pos = 11;
	const char *bad;

	if (size < 11)
		return NULL;
	memset(&in, 0, sizeof(in));
	in.status = (MlplatRolloutStatus) (data[0] % 8);
	in.request = (MlRolloutRequest) (data[1] % 3);
	in.settled = data[2] & 1;
	in.window_started = data[2] & 2;
	in.has_decide_at = data[2] & 4;
	in.has_metrics = data[2] & 8;
	in.window_seconds = data[3] + 1;
	in.observed_at_ms = 1700000000000LL;
	in.decide_at_ms = in.observed_at_ms + ((data[4] << 8) | data[5]) - 32768;
	in.target_kn = NAME(data[6]);
	in.previous_kn = NAME(data[7]);
	in.latest_created_kn = NAME(data[8]);
	in.rolledout_kn = NAME(data[9]);
	for (int i = 0; i < data[10] % (MAX_TRAFFIC + 1) && pos + 2 <= size; i++, pos += 2)
	{
		traffic[in.ntraffic].revision = NAME(data[pos]);
		traffic[in.ntraffic].percent = data[pos + 1] % 101;
		in.ntraffic++;
	}
	in.traffic = traffic;
	/* a private copy, NUL-terminated like a text from SQL, so overreads show */
	fraction = malloc(size - pos + 1);
	if (fraction == NULL)
		abort();
	memcpy(fraction, data + pos, size - pos);
	fraction[size - pos] = '\0';
	in.fraction = fraction;

	ml_rollout_pass_decide(&in, &d1);
	ml_rollout_pass_decide(&in, &d2);
	if (memcmp(&d1, &d2, sizeof(d1)) != 0)
		bad = "the same input decided differently";
	else
		bad = check_decision(&in, &d1);
	if (bad == NULL)
		bad = check_after_plan(data, size, &in);
	free(fraction);
	return bad;
}

MLFUZZ_TARGET(mlfuzz_check_rollout_decide)
