/*
 * rollout_decide.c — what one observation means for a rollout (see
 * include/mlplat/rollout_decide.h).  Pure: no PostgreSQL headers, no I/O,
 * so test/unit and fuzz/ build it without a server.
 */
#include <stdio.h>
#include <string.h>

#include "mlplat/rollout_decide.h"

MlRolloutRequest
ml_rollout_request_of(const char *requested_action)
{
	if (requested_action == NULL)
		return ML_ROLLOUT_REQUEST_NONE;
	if (strcmp(requested_action, "PROMOTE") == 0)
		return ML_ROLLOUT_REQUEST_PROMOTE;
	if (strcmp(requested_action, "ABORT") == 0)
		return ML_ROLLOUT_REQUEST_ABORT;
	return ML_ROLLOUT_REQUEST_NONE;
}

const char *
ml_rollout_step_name(MlRolloutStep step)
{
	static const char *const names[] = { "WAIT", "CLOSE", "REASON", "START", "NOT_DUE", "DECIDE" };

	return (unsigned) step < sizeof(names) / sizeof(names[0]) ? names[step] : "WAIT";
}

/*
 * The fraction (decimal text, digits and at most one point) in percent,
 * rounded half away from zero; -1 when it is no such text or above 1.
 * Exact: "0.145" is 15, as numeric rounds it, where a double would say 14.
 */
static int
fraction_percent(const char *s, bool *zero)
{
	long whole = 0;
	int dec[3] = { 0, 0, 0 };
	int ndec = 0;
	bool digits = false;
	bool nonzero = false;
	bool frac_nonzero = false;
	const char *p = s;
	int pct;

	for (; *p >= '0' && *p <= '9'; p++)
	{
		if (whole > 1)
			return -1;
		whole = whole * 10 + (*p - '0');
		digits = true;
		nonzero |= *p != '0';
	}
	if (*p == '.')
	{
		for (p++; *p >= '0' && *p <= '9'; p++)
		{
			if (ndec < 3)
				dec[ndec++] = *p - '0';
			digits = true;
			frac_nonzero |= *p != '0';
		}
	}
	if (*p != '\0' || !digits || whole > 1)
		return -1;
	if (whole == 1 && frac_nonzero)
		return -1;
	pct = (int) whole * 100 + dec[0] * 10 + dec[1] + (dec[2] >= 5 ? 1 : 0);
	*zero = !nonzero && !frac_nonzero;
	return pct;
}

int
ml_rollout_want_percent(MlplatRolloutStatus status, MlRolloutRequest request, const char *fraction, bool *zero)
{
	bool z = true;
	int pct = fraction ? fraction_percent(fraction, &z) : 0;

	if (pct < 0)
	{
		pct = 0;
		z = true;
	}
	if (zero)
		*zero = z;
	if (status == MLPLAT_ROLLOUT_ROLLING_BACK)
		return 0;
	if (request == ML_ROLLOUT_REQUEST_PROMOTE)
		return -1;
	return pct;
}

static bool
same(const char *a, const char *b)
{
	return a != NULL && b != NULL && strcmp(a, b) == 0;
}

/* The percent the observed traffic gives revision kn (0 for none or an unknown name) */
static int
traffic_on(const MlRolloutPassIn *in, const char *kn, bool *listed)
{
	int sum = 0;

	if (listed)
		*listed = false;
	for (size_t i = 0; i < in->ntraffic; i++)
	{
		if (!same(in->traffic[i].revision, kn))
			continue;
		sum += in->traffic[i].percent;
		if (listed)
			*listed = true;
	}
	return sum;
}

void
ml_rollout_pass_decide(const MlRolloutPassIn *in, MlRolloutPassDecision *d)
{
	bool previous_listed;

	memset(d, 0, sizeof(*d));
	d->want_percent = ml_rollout_want_percent(in->status, in->request, in->fraction, &d->fraction_zero);

	/*
	 * KServe's names for our two revisions, fixed at first sight: the target
	 * is the revision created for our manifest, the previous one is what
	 * KServe had rolled out.
	 */
	d->target_kn = in->target_kn ? in->target_kn : in->settled ? in->latest_created_kn
															   : NULL;
	d->previous_kn = in->previous_kn;
	if (d->previous_kn == NULL && in->settled && in->rolledout_kn != NULL && !same(in->rolledout_kn, d->target_kn))
		d->previous_kn = in->rolledout_kn;
	d->target_percent = traffic_on(in, d->target_kn, NULL);
	d->previous_percent = traffic_on(in, d->previous_kn, &previous_listed);

	if (!in->settled || d->target_kn == NULL)
	{
		d->step = ML_ROLLOUT_STEP_WAIT;
		return;
	}

	if (in->status == MLPLAT_ROLLOUT_ROLLING_BACK)
	{
		if (d->previous_kn != NULL && d->previous_percent == 100)
		{
			d->step = ML_ROLLOUT_STEP_CLOSE;
			d->close_kn = d->previous_kn;
			d->close_status = in->request == ML_ROLLOUT_REQUEST_ABORT ? MLPLAT_ROLLOUT_ABORTED
																	  : MLPLAT_ROLLOUT_ROLLED_BACK;
			return;
		}
		d->step = ML_ROLLOUT_STEP_REASON;
		if (d->previous_kn == NULL || !previous_listed)
			snprintf(d->status_reason, sizeof(d->status_reason),
					 "rollback route lost: previous revision %s is not in the route",
					 d->previous_kn ? d->previous_kn : "(unknown)");
		else
			snprintf(d->status_reason, sizeof(d->status_reason), "rolling back: %d%% still on the target",
					 d->target_percent);
		return;
	}
	if (in->request == ML_ROLLOUT_REQUEST_PROMOTE)
	{
		if (d->target_percent == 100)
		{
			d->step = ML_ROLLOUT_STEP_CLOSE;
			d->close_kn = d->target_kn;
			d->close_status = MLPLAT_ROLLOUT_PROMOTED;
			return;
		}
		d->step = ML_ROLLOUT_STEP_REASON;
		snprintf(d->status_reason, sizeof(d->status_reason), "promoting: %d%% on the target so far",
				 d->target_percent);
		return;
	}

	/* A window runs while the observed split is the one the rollout stands at. */
	if (d->target_percent != d->want_percent)
	{
		d->step = ML_ROLLOUT_STEP_REASON;
		d->clear_window = true;
		snprintf(d->status_reason, sizeof(d->status_reason), "waiting for %d%% on the target (observed %d%%)",
				 d->want_percent, d->target_percent);
		return;
	}
	if (!in->window_started)
	{
		/*
		 * The window starts when this observation saw the split (evidence
		 * times have millisecond precision: no waiting for a whole second).
		 */
		d->start_window = true;
		d->window_start_ms = in->observed_at_ms;
		d->decide_at_ms = in->observed_at_ms + (d->fraction_zero ? 0 : (int64_t) in->window_seconds * 1000);
		snprintf(d->status_reason, sizeof(d->status_reason), "observing %d%% on the target", d->want_percent);
		if (!d->fraction_zero)
		{
			d->step = ML_ROLLOUT_STEP_START;
			return;
		}
		/*
		 * At 0% the first decision needs readiness only (no window, no
		 * request metrics): this observation is the evidence, decided at once.
		 */
		d->step = ML_ROLLOUT_STEP_DECIDE;
		return;
	}
	if ((!in->has_metrics && !d->fraction_zero) || (in->has_decide_at && in->observed_at_ms < in->decide_at_ms))
	{
		d->step = ML_ROLLOUT_STEP_NOT_DUE;
		return;
	}
	d->step = ML_ROLLOUT_STEP_DECIDE;
}

bool
ml_rollout_after_plan(const char *decision, const char *const *reasons, size_t nreasons, int window_seconds,
					  int64_t observed_at_ms, MlRolloutAfterPlan *a)
{
	MlRolloutAfterPlan r;
	bool ceiling = false;
	size_t len;
	int recheck;

	memset(&r, 0, sizeof(r));
	if (decision == NULL)
		return false;
	for (size_t i = 0; i < nreasons; i++)
		ceiling |= same(reasons[i], "AT_CEILING") || same(reasons[i], "TRAFFIC_COMPLETE");
	if (strcmp(decision, "ADVANCE") == 0)
		r.status = MLPLAT_ROLLOUT_PROGRESSING;
	else if (strcmp(decision, "ROLLBACK") == 0)
		r.status = MLPLAT_ROLLOUT_ROLLING_BACK;
	else if (strcmp(decision, "HOLD") == 0)
	{
		r.status = ceiling ? MLPLAT_ROLLOUT_AT_CEILING : MLPLAT_ROLLOUT_HOLDING;
		r.keep_window = true;
		/*
		 * After a hold, look again a fifth of a window later (1 s to 60 s);
		 * at the ceiling, where only a regression can still change anything,
		 * once per window.
		 */
		if (r.status == MLPLAT_ROLLOUT_AT_CEILING)
			recheck = window_seconds;
		else
		{
			recheck = window_seconds / 5;
			recheck = recheck < 1 ? 1 : recheck > 60 ? 60
													 : recheck;
		}
		r.decide_at_ms = observed_at_ms + (int64_t) recheck * 1000;
	}
	else
		return false;
	len = (size_t) snprintf(r.status_reason, sizeof(r.status_reason), "%s: ", decision);
	for (size_t i = 0; i < nreasons && len < sizeof(r.status_reason); i++)
		len += (size_t) snprintf(r.status_reason + len, sizeof(r.status_reason) - len, "%s%s", i ? ", " : "",
								 reasons[i] ? reasons[i] : "");
	*a = r;
	return true;
}
