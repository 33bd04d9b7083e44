/*
 * rollout_decide_test.c — unit test of the rollouts reconciler's pure
 * decision (src/reconcile/rollout_decide.c; TAP, no PostgreSQL): each step
 * of ml_rollout_pass_decide (KServe not settled, rolling back with and without
 * the route, promotion, waiting for the split, a window starting at 0% and
 * above, a decision due or not) with the texts it writes, the want percent's
 * rounding, and ml_rollout_after_plan's statuses and recheck times.  A plan
 * refused is not this module's: plan_rollout's core refuses the evidence
 * (rollout_test.c, "more errors than requests") and the write-back records
 * REFUSED (regress rollout_reconcile).
 *
 * Usage: rollout_decide_test [number of tests before these]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlplat/rollout_decide.h"
#include "unit_tap.h"

#include <stdint.h>

const char *mlfuzz_check_rollout_decide(const uint8_t *data, size_t size);

static bool
str_is(const char *a, const char *b)
{
	return a != NULL && b != NULL && strcmp(a, b) == 0;
}

#define AT 1700000000123LL

static const MlRolloutTraffic split_5[] = { { "scorer-00002", 5 }, { "scorer-00001", 95 } };
static const MlRolloutTraffic all_target[] = { { "scorer-00002", 100 } };
static const MlRolloutTraffic all_previous[] = { { "scorer-00001", 100 }, { "scorer-00002", 0 } };
static const MlRolloutTraffic without_previous[] = { { "scorer-00002", 60 }, { "scorer-00003", 40 } };

/* A progressing rollout at 5%, names known, window not started, split observed. */
static MlRolloutPassIn
base(void)
{
	MlRolloutPassIn in;

	memset(&in, 0, sizeof(in));
	in.status = MLPLAT_ROLLOUT_PROGRESSING;
	in.fraction = "0.05";
	in.target_kn = "scorer-00002";
	in.previous_kn = "scorer-00001";
	in.window_seconds = 300;
	in.observed_at_ms = AT;
	in.settled = true;
	in.latest_created_kn = "scorer-00002";
	in.rolledout_kn = "scorer-00001";
	in.traffic = split_5;
	in.ntraffic = 2;
	return in;
}

static void
test_want_percent(void)
{
	bool zero = false;

	ok(ml_rollout_want_percent(MLPLAT_ROLLOUT_PROGRESSING, ML_ROLLOUT_REQUEST_NONE, "0.05", &zero) == 5 && !zero,
	   "want: 0.05 is 5%");
	ok(ml_rollout_want_percent(MLPLAT_ROLLOUT_HOLDING, ML_ROLLOUT_REQUEST_NONE, "0.145", NULL) == 15,
	   "want: 0.145 rounds half away from zero (15), as numeric does");
	ok(ml_rollout_want_percent(MLPLAT_ROLLOUT_HOLDING, ML_ROLLOUT_REQUEST_NONE, "0.1449", NULL) == 14,
	   "want: 0.1449 is 14");
	ok(ml_rollout_want_percent(MLPLAT_ROLLOUT_AT_CEILING, ML_ROLLOUT_REQUEST_NONE, "1.000", &zero) == 100 && !zero,
	   "want: 1.000 is 100%");
	ok(ml_rollout_want_percent(MLPLAT_ROLLOUT_PROGRESSING, ML_ROLLOUT_REQUEST_NONE, "0.000", &zero) == 0 && zero,
	   "want: 0.000 is 0%, and zero");
	ok(ml_rollout_want_percent(MLPLAT_ROLLOUT_PROGRESSING, ML_ROLLOUT_REQUEST_NONE, "0.001", &zero) == 0 && !zero,
	   "want: 0.001 rounds to 0% but is not zero");
	ok(ml_rollout_want_percent(MLPLAT_ROLLOUT_PROGRESSING, ML_ROLLOUT_REQUEST_NONE, NULL, &zero) == 0 && zero,
	   "want: no fraction is 0");
	ok(ml_rollout_want_percent(MLPLAT_ROLLOUT_PROGRESSING, ML_ROLLOUT_REQUEST_NONE, "1.5", &zero) == 0 && zero,
	   "want: a fraction above 1 counts as 0");
	ok(ml_rollout_want_percent(MLPLAT_ROLLOUT_PROGRESSING, ML_ROLLOUT_REQUEST_NONE, "x", &zero) == 0 && zero,
	   "want: text that is no number counts as 0");
	ok(ml_rollout_want_percent(MLPLAT_ROLLOUT_ROLLING_BACK, ML_ROLLOUT_REQUEST_PROMOTE, "0.5", NULL) == 0,
	   "want: rolling back is 0%, whatever is asked");
	ok(ml_rollout_want_percent(MLPLAT_ROLLOUT_HOLDING, ML_ROLLOUT_REQUEST_PROMOTE, "0.5", NULL) == -1,
	   "want: promotion asked removes the canary setting (-1)");
	ok(ml_rollout_request_of("PROMOTE") == ML_ROLLOUT_REQUEST_PROMOTE &&
		   ml_rollout_request_of("ABORT") == ML_ROLLOUT_REQUEST_ABORT &&
		   ml_rollout_request_of(NULL) == ML_ROLLOUT_REQUEST_NONE &&
		   ml_rollout_request_of("promote") == ML_ROLLOUT_REQUEST_NONE,
	   "request: PROMOTE, ABORT, none");
}

static void
test_names_and_settling(void)
{
	MlRolloutPassIn in = base();
	MlRolloutPassDecision d;

	in.settled = false;
	ml_rollout_pass_decide(&in, &d);
	ok(d.step == ML_ROLLOUT_STEP_WAIT && d.target_percent == 5 && d.previous_percent == 95,
	   "not settled: wait (the traffic is still reported)");

	in = base();
	in.target_kn = in.previous_kn = NULL;
	in.settled = false;
	ml_rollout_pass_decide(&in, &d);
	ok(d.step == ML_ROLLOUT_STEP_WAIT && d.target_kn == NULL && d.previous_kn == NULL,
	   "not settled: names are not fixed from an unsettled status");

	in = base();
	in.target_kn = in.previous_kn = NULL;
	ml_rollout_pass_decide(&in, &d);
	ok(str_is(d.target_kn, "scorer-00002") && str_is(d.previous_kn, "scorer-00001"),
	   "settled: the target is the latest created, the previous the rolled-out revision");

	in.rolledout_kn = "scorer-00002";
	ml_rollout_pass_decide(&in, &d);
	ok(str_is(d.target_kn, "scorer-00002") && d.previous_kn == NULL,
	   "settled: a rolled-out revision that is the target is no previous one");

	in = base();
	in.target_kn = NULL;
	in.latest_created_kn = NULL;
	ml_rollout_pass_decide(&in, &d);
	ok(d.step == ML_ROLLOUT_STEP_WAIT && d.target_kn == NULL, "settled without a target name: wait");

	in = base();
	in.latest_created_kn = "scorer-00009";
	in.rolledout_kn = "scorer-00008";
	ml_rollout_pass_decide(&in, &d);
	ok(str_is(d.target_kn, "scorer-00002") && str_is(d.previous_kn, "scorer-00001"),
	   "names once fixed stay fixed");
}

static void
test_rolling_back(void)
{
	MlRolloutPassIn in = base();
	MlRolloutPassDecision d;

	in.status = MLPLAT_ROLLOUT_ROLLING_BACK;
	in.traffic = all_previous;
	ml_rollout_pass_decide(&in, &d);
	ok(d.step == ML_ROLLOUT_STEP_CLOSE && str_is(d.close_kn, "scorer-00001") &&
		   d.close_status == MLPLAT_ROLLOUT_ROLLED_BACK && d.want_percent == 0,
	   "rolling back, 100% on the previous revision: close ROLLED_BACK on it");

	in.request = ML_ROLLOUT_REQUEST_ABORT;
	ml_rollout_pass_decide(&in, &d);
	ok(d.step == ML_ROLLOUT_STEP_CLOSE && d.close_status == MLPLAT_ROLLOUT_ABORTED,
	   "rolling back on an abort: close ABORTED");

	in = base();
	in.status = MLPLAT_ROLLOUT_ROLLING_BACK;
	ml_rollout_pass_decide(&in, &d);
	ok(d.step == ML_ROLLOUT_STEP_REASON && !d.clear_window &&
		   str_is(d.status_reason, "rolling back: 5% still on the target"),
	   "rolling back, route there: the share still on the target");

	in.traffic = without_previous;
	ml_rollout_pass_decide(&in, &d);
	ok(d.step == ML_ROLLOUT_STEP_REASON &&
		   str_is(d.status_reason, "rollback route lost: previous revision scorer-00001 is not in the route"),
	   "rolling back, previous revision not in the route: route lost");

	in.previous_kn = NULL;
	in.rolledout_kn = NULL;
	ml_rollout_pass_decide(&in, &d);
	ok(d.step == ML_ROLLOUT_STEP_REASON &&
		   str_is(d.status_reason, "rollback route lost: previous revision (unknown) is not in the route"),
	   "rolling back, previous revision unknown: route lost, (unknown)");
}

static void
test_promote(void)
{
	MlRolloutPassIn in = base();
	MlRolloutPassDecision d;

	in.request = ML_ROLLOUT_REQUEST_PROMOTE;
	in.traffic = all_target;
	in.ntraffic = 1;
	ml_rollout_pass_decide(&in, &d);
	ok(d.step == ML_ROLLOUT_STEP_CLOSE && str_is(d.close_kn, "scorer-00002") &&
		   d.close_status == MLPLAT_ROLLOUT_PROMOTED && d.want_percent == -1,
	   "promotion asked, 100% on the target: close PROMOTED on it");

	in = base();
	in.request = ML_ROLLOUT_REQUEST_PROMOTE;
	ml_rollout_pass_decide(&in, &d);
	ok(d.step == ML_ROLLOUT_STEP_REASON && str_is(d.status_reason, "promoting: 5% on the target so far"),
	   "promotion asked, not yet all on the target: promoting");
}

static void
test_windows(void)
{
	MlRolloutPassIn in = base();
	MlRolloutPassDecision d;

	in.fraction = "0.2";
	in.window_started = in.has_decide_at = true;
	in.decide_at_ms = AT - 1;
	ml_rollout_pass_decide(&in, &d);
	ok(d.step == ML_ROLLOUT_STEP_REASON && d.clear_window &&
		   str_is(d.status_reason, "waiting for 20% on the target (observed 5%)"),
	   "split not the one wanted: waiting, window cleared");

	in = base();
	ml_rollout_pass_decide(&in, &d);
	ok(d.step == ML_ROLLOUT_STEP_START && d.start_window && d.window_start_ms == AT &&
		   d.decide_at_ms == AT + 300000 && str_is(d.status_reason, "observing 5% on the target"),
	   "window starts above 0%: decide a window later");

	in = base();
	in.fraction = "0";
	in.traffic = all_previous;
	ml_rollout_pass_decide(&in, &d);
	ok(d.step == ML_ROLLOUT_STEP_DECIDE && d.start_window && d.window_start_ms == AT && d.decide_at_ms == AT &&
		   d.fraction_zero && str_is(d.status_reason, "observing 0% on the target"),
	   "window starts at 0%: decided at once, without metrics");

	in = base();
	in.window_started = in.has_decide_at = true;
	in.decide_at_ms = AT + 1;
	in.has_metrics = true;
	ml_rollout_pass_decide(&in, &d);
	ok(d.step == ML_ROLLOUT_STEP_NOT_DUE && !d.start_window, "window runs, decide_at a millisecond ahead: not due");

	in.decide_at_ms = AT;
	ml_rollout_pass_decide(&in, &d);
	ok(d.step == ML_ROLLOUT_STEP_DECIDE && !d.start_window, "window runs, decide_at reached with metrics: decide");

	in.has_metrics = false;
	ml_rollout_pass_decide(&in, &d);
	ok(d.step == ML_ROLLOUT_STEP_NOT_DUE, "decide_at reached above 0% without metrics: not due");

	in.fraction = "0";
	in.traffic = all_previous;
	ml_rollout_pass_decide(&in, &d);
	ok(d.step == ML_ROLLOUT_STEP_DECIDE, "decide_at reached at 0% without metrics: decide");

	in = base();
	in.window_started = true;
	in.has_decide_at = false;
	in.has_metrics = true;
	ml_rollout_pass_decide(&in, &d);
	ok(d.step == ML_ROLLOUT_STEP_DECIDE, "window without decide_at: due (as SQL's at < NULL)");
}

static void
test_after_plan(void)
{
	static const char *const hold[] = { "INSUFFICIENT_SAMPLES", "WINDOW_INCOMPLETE" };
	static const char *const ceiling[] = { "AT_CEILING" };
	static const char *const complete[] = { "TRAFFIC_COMPLETE" };
	static const char *const passed[] = { "ALL_GATES_PASSED" };
	MlRolloutAfterPlan a;

	ok(ml_rollout_after_plan("ADVANCE", passed, 1, 300, AT, &a) && a.status == MLPLAT_ROLLOUT_PROGRESSING &&
		   !a.keep_window && str_is(a.status_reason, "ADVANCE: ALL_GATES_PASSED"),
	   "after ADVANCE: PROGRESSING, window ends");
	ok(ml_rollout_after_plan("ROLLBACK", hold, 2, 300, AT, &a) && a.status == MLPLAT_ROLLOUT_ROLLING_BACK &&
		   !a.keep_window,
	   "after ROLLBACK: ROLLING_BACK");
	ok(ml_rollout_after_plan("HOLD", hold, 2, 300, AT, &a) && a.status == MLPLAT_ROLLOUT_HOLDING && a.keep_window &&
		   a.decide_at_ms == AT + 60000 && str_is(a.status_reason, "HOLD: INSUFFICIENT_SAMPLES, WINDOW_INCOMPLETE"),
	   "after HOLD: HOLDING, again a fifth of a window later (at most 60 s)");
	ok(ml_rollout_after_plan("HOLD", hold, 2, 100, AT, &a) && a.decide_at_ms == AT + 20000,
	   "after HOLD, 100 s window: again in 20 s");
	ok(ml_rollout_after_plan("HOLD", hold, 2, 3, AT, &a) && a.decide_at_ms == AT + 1000,
	   "after HOLD, 3 s window: again in at least 1 s");
	ok(ml_rollout_after_plan("HOLD", ceiling, 1, 300, AT, &a) && a.status == MLPLAT_ROLLOUT_AT_CEILING &&
		   a.decide_at_ms == AT + 300000,
	   "after HOLD at the ceiling: AT_CEILING, again a window later");
	ok(ml_rollout_after_plan("HOLD", complete, 1, 30, AT, &a) && a.status == MLPLAT_ROLLOUT_AT_CEILING,
	   "after HOLD with the traffic complete: AT_CEILING");
	ok(ml_rollout_after_plan("HOLD", NULL, 0, 30, AT, &a) && str_is(a.status_reason, "HOLD: "),
	   "after HOLD without reasons: the decision alone");
	ok(!ml_rollout_after_plan("PAUSE", NULL, 0, 30, AT, &a) && !ml_rollout_after_plan(NULL, NULL, 0, 30, AT, &a),
	   "no decision of the three: refused");
}

/* The fuzz property (fuzz/fuzz_rollout_decide.c) over inputs from a fixed generator. */
static void
test_fuzz_property(void)
{
	uint8_t buf[40];
	uint32_t x = 12345;
	const char *bad = NULL;
	int i;

	for (i = 0; i < 50000 && bad == NULL; i++)
	{
		size_t size = 11 + i % 29;

		for (size_t j = 0; j < size; j++)
		{
			x = x * 1103515245u + 12345u;
			buf[j] = (uint8_t) (x >> 16);
		}
		/* the fraction's text: mostly decimals */
		if (i % 3 != 0)
			snprintf((char *) buf + size - 6, 6, "0.%03u", (unsigned) (x % 1000));
		bad = mlfuzz_check_rollout_decide(buf, i % 3 != 0 ? size - 1 : size);
	}
	if (bad)
		printf("# input %d: %s\n", i - 1, bad);
	ok(bad == NULL, "the fuzz property holds on 50000 generated inputs");
}

int
main(int argc, char **argv)
{
	unit_tap_begin(argc, argv);
	test_want_percent();
	test_names_and_settling();
	test_rolling_back();
	test_promote();
	test_windows();
	test_after_plan();
	test_fuzz_property();
	return unit_tap_end();
}
