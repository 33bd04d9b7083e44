/*
 * rollouts.c — the rollouts reconciler: canary traffic on KServe, evidence
 * from the InferenceService status and Prometheus, decisions by plan_rollout.
 *
 * One pass:
 *   1. claim every active rollout (short transaction): the target revision's
 *      manifest with the canaryTrafficPercent it must carry now, the window
 *      and whether a decision is due — all derived from the database (the
 *      fraction from the transition ledger), nothing from memory;
 *   2. observe (observe.h): GET each InferenceService (one concurrent batch),
 *      read once into an MlplatObservedObject that is all the steps after
 *      read; Prometheus is asked and read through observe.h too;
 *   3. per rollout, either apply the manifest (Server-Side Apply, the same
 *      field manager as the deployments reconciler, see below) when the object
 *      does not carry the wanted revision and traffic setting, or — when a
 *      decision is due — query Prometheus for both revisions over the window
 *      (a second concurrent batch);
 *   4. decide (decide(), the pure rollout_decide.c) what each observation
 *      means for the claimed row: the claim carries every input; for a due
 *      decision, plan() builds the evidence record and its content id, calls
 *      plan_rollout's core and names the status after it (the pure
 *      src/rollout/pass_plan.c, from the claimed contract, fraction and
 *      replica counts);
 *   5. write back per rollout in a new short transaction through
 *      mlplat._rollouts_observe(), which CASes on row_version and the leader
 *      epoch (so the row is the one the decision was made on) and applies the
 *      decision: for a due one it appends the transition ledger row (keyed by
 *      the evidence content id) and stores the one transition, as decided.
 * Every apply is noted in mlplat.unanswered_writes before it is sent (unanswered.h);
 * a pass that finds the wanted setting already on the object while such a note is
 * left (the leader that applied it ended before its write-back) records it in the
 * ledger as ADOPT, so no apply that reached the cluster goes unrecorded.
 *
 * Ownership of the InferenceService: while a rollout is active, the
 * deployments reconciler does not write the object (its claim marks the
 * deployment not due) and this reconciler applies the target's manifest plus
 * spec.predictor.canaryTrafficPercent under the same field manager "mlplat".
 * Same manager on purpose: when the rollout ends and the deployments
 * reconciler applies a manifest without canaryTrafficPercent, Server-Side
 * Apply removes the field, because its manager no longer applies it.  With a
 * separate manager the canary setting would outlive the rollout.
 */
#include "postgres.h"

#include <math.h>
#include <time.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "mlplat/artifact.h"
#include "mlplat/backoff.h"
#include "mlplat/guc.h"
#include "mlplat/http.h"
#include "mlplat/isvc_owner.h"
#include "mlplat/json.h"
#include "mlplat/json_jsonb.h"
#include "mlplat/kube.h"
#include "mlplat/ledger.h"
#include "mlplat/observe.h"
#include "mlplat/pass_text.h"
#include "mlplat/pass_work.h"
#include "mlplat/prometheus.h"
#include "mlplat/reconcile.h"
#include "mlplat/retry.h"
#include "mlplat/rollout_artifacts.h"
#include "mlplat/rollout_decide.h"
#include "mlplat/rollout_pass_plan.h"
#include "mlplat/seam.h"
#include "mlplat/span.h"
#include "mlplat/unanswered.h"

static const MlplatKubeResource ISVC = { "serving.kserve.io", "v1beta1", "inferenceservices", true };

/*
 * How soon to look again while KServe settles a new traffic setting: every
 * millisecond between the split becoming ready and our seeing it delays the
 * window, and with it the whole rollout.  One GET per look.
 */
#define SETTLE_POLL_MS 20
/*
 * Instead of looking every SETTLE_POLL_MS, a pass that leaves rollouts waiting
 * for KServe (and nothing else due within the second) WATCHes their
 * InferenceServices from the versions it last saw, for at most a second (the
 * server ends a watch; the client gives it WATCH_SLACK_MS more), and the next
 * pass comes as soon as one of them changes or a commit wakes the worker.
 * The watch is only a wake-up: the next pass reads the object as always, and
 * that observation is the evidence.
 */
#define WATCH_S 1
#define WATCH_SLACK_MS 2000
/* the longest sleep while a rollout is active (a rollout in backoff comes due by then) */
#define ACTIVE_POLL_MS 1000

/* The three numbers per revision, in the order of the queries. */
typedef enum Metric
{
	M_REQUESTS = 0,
	M_ERRORS,
	M_P95,
	M_COUNT
} Metric;

static const char *const metric_names[M_COUNT] = { "requests", "errors", "p95_ms" };

typedef struct Rollout
{
	/* claimed: the attributes of mlplat.rollout_claim */
	MLPLAT_SEAM_MEMBERS(rollout_claim)
	MlPromPreset preset; /* ... or mlplat.metrics_preset */
	/* this pass */
	MlplatObservedObject seen; /* the InferenceService, observed (observe.h); seen.get NULL: not looked at */
	bool carries;			   /* it carries the wanted revision and traffic setting (observe_object) */
	MlplatHttpRequest *apply;
	MlplatHttpRequest *prom[2][M_COUNT]; /* [0] target, [1] previous */
	bool bad_kn[2];						 /* a revision name from the status that is no DNS label: not queried */
	int64 metric_start_ms;
	int64 metric_ms;
	bool metrics;	/* a decision is due: metrics were gathered */
	StringInfo obs; /* observation JSON (without metrics) */
	bool applied;
	char *error;
	char *ledger_error; /* the ledger's error when error is the tenant's version */
	const char *rv;		/* resourceVersion of the object as last read or applied */
	MlplatHttpRequest *watch;
	bool changed; /* the watch saw an event */
	int retry_ms;
	int http_status;
	bool settled;
	bool moved;							/* a decision changed the wanted split: apply it at once */
	const MlplatUnanswered *unanswered; /* an apply to it never answered */
	bool not_ours;						/* it is not the deployment's own: touch nothing */
	bool adopt;							/* found what that apply made: ledger ADOPT */
	int adopt_percent;					/* ... the setting it made (-1: canary removed) */
	bool settle_note;					/* remove its note (found what it made) */
	bool answered;						/* this pass's apply was answered: remove its own note */
	/* what observe_object read for the decision (the same values r->obs carries) */
	int64 observed_at_ms;
	const char *latest_created_kn;
	const char *rolledout_kn;
	MlRolloutTraffic *traffic;
	size_t ntraffic;
	/* what the observation means for the claimed row (decide); decided: the write-back applies it */
	bool decided;
	MlRolloutPassDecision decision;
	MlRolloutPassPlan *plan; /* DECIDE: the evidence, plan_rollout's transition, the status after it */
} Rollout;

/* ---------------------------------------------------------------- pure helpers */

/* Append epoch ms as seconds with millisecond precision, as the evidence writes times. */
static void
append_secs(StringInfo s, int64 ms)
{
	appendStringInfo(s, INT64_FORMAT, ms / 1000);
	if (ms % 1000 != 0)
	{
		char frac[8];
		int n = snprintf(frac, sizeof(frac), ".%03d", (int) (ms % 1000));

		while (frac[n - 1] == '0')
			frac[--n] = '\0';
		appendStringInfoString(s, frac);
	}
}

static void
json_key_str(StringInfo s, const char *key, const char *val)
{
	appendStringInfo(s, "%s\"%s\":", s->len > 1 ? "," : "", key);
	mlplat_json_append_text(s, val);
}

/* The Ready condition of KServe's status: "True", "False" or "Unknown". */
static const char *
ready_condition(const MlJsonValue *obj)
{
	const MlJsonValue *conds = ml_json_object_get(ml_json_object_get(obj, "status"), "conditions");

	if (conds == NULL || conds->type != ML_JSON_ARRAY)
		return "Unknown";
	for (size_t i = 0; i < conds->u.array.count; i++)
	{
		const char *type = mlplat_json_text(conds->u.array.items[i], "type", NULL, NULL);
		const char *st = mlplat_json_text(conds->u.array.items[i], "status", NULL, NULL);

		if (type && st && strcmp(type, "Ready") == 0)
			return strcmp(st, "True") == 0 ? "True" : strcmp(st, "False") == 0 ? "False"
																			   : "Unknown";
	}
	return "Unknown";
}

/*
 * Does KServe's status describe the traffic setting the object carries?  Not
 * from status.observedGeneration: KServe copies that from its child (the
 * Knative Service; kserve#6081), whose generation is not the
 * InferenceService's.  From what it publishes instead: Ready decided; when
 * Ready, the revision Knative created last is the ready one and the traffic
 * KServe reports gives it the share asked for — canaryTrafficPercent while an
 * older revision is rolled out, else 100%.  Before the target's revision is
 * known, a status whose latest revision is still the rolled-out one has not
 * seen the target manifest yet.  (RawDeployment publishes no revisions or
 * traffic: a rollout there never settles.)
 */
static bool
isvc_settled(const Rollout *r, const MlJsonValue *comp, const char *ready)
{
	const char *created = mlplat_json_text(comp, "latestCreatedRevision", NULL, NULL);
	const char *ready_kn = mlplat_json_text(comp, "latestReadyRevision", NULL, NULL);
	const char *rolled = mlplat_json_text(comp, "latestRolledoutRevision", NULL, NULL);
	const MlJsonValue *traffic = ml_json_object_get(comp, "traffic");
	bool split;
	int expect;

	/* "Unknown", said as neither of the others: gcc's -Wstring-compare misjudges it once inlined */
	if ((strcmp(ready, "True") != 0 && strcmp(ready, "False") != 0) || created == NULL)
		return false;
	if (strcmp(ready, "False") == 0)
		return true; /* KServe's verdict on the latest revision */
	if (ready_kn == NULL || strcmp(created, ready_kn) != 0)
		return false;
	split = r->want_percent >= 0 && r->want_percent < 100 && rolled != NULL && strcmp(rolled, created) != 0;
	if (r->target_kn == NULL && r->want_percent >= 0 && rolled != NULL && !split)
		return false; /* the target's revision is not created yet */
	expect = split ? r->want_percent : 100;
	if (traffic == NULL || traffic->type != ML_JSON_ARRAY)
		return false;
	for (size_t i = 0; i < traffic->u.array.count; i++)
	{
		const MlJsonValue *t = traffic->u.array.items[i];
		const MlJsonValue *latest = ml_json_object_get(t, "latestRevision");
		const MlJsonValue *pct = ml_json_object_get(t, "percent");

		if (latest && latest->type == ML_JSON_BOOL && latest->u.boolean)
			return pct != NULL && pct->type == ML_JSON_NUMBER && (int) pct->u.number.value == expect;
	}
	return false;
}

/* Does the object carry the target revision with canaryTrafficPercent `want` (-1: none)? */
static bool
carries_setting(const MlJsonValue *obj, int target_revision, int want)
{
	const char *label = mlplat_json_text(obj, "metadata", "labels", "mlplat.io/revision");
	const MlJsonValue *pred = ml_json_object_get(ml_json_object_get(obj, "spec"), "predictor");
	const MlJsonValue *canary = ml_json_object_get(pred, "canaryTrafficPercent");

	if (label == NULL || atoi(label) != target_revision)
		return false;
	return want < 0 ? canary == NULL
					: canary != NULL && canary->type == ML_JSON_NUMBER && canary->u.number.is_integer &&
						  (int) canary->u.number.value == want;
}

/*
 * The setting an unanswered apply sent: its note's action is "APPLY <percent>"; a note
 * written before the percent was noted ("APPLY") is taken as the setting wanted now.
 */
static int
noted_percent(const MlplatUnanswered *u, int want)
{
	return strncmp(u->action, "APPLY ", 6) == 0 ? atoi(u->action + 6) : want;
}

/* The note of an apply of canaryTrafficPercent `want` (-1: removed), before it is sent */
static char *
apply_note(int want)
{
	return psprintf("APPLY %d", want);
}

/*
 * Does the observed object carry the wanted revision and traffic setting?
 * When it does, write the observation (what SQL needs to judge it) into r->obs.
 */
static bool
observe_object(Rollout *r, const MlJsonValue *obj, int64 now_ms)
{
	const MlJsonValue *comp = ml_json_object_get(ml_json_object_get(ml_json_object_get(obj, "status"),
																	"components"),
												 "predictor");
	const MlJsonValue *traffic = ml_json_object_get(comp, "traffic");
	const char *ready = ready_condition(obj);
	StringInfo s;

	if (!carries_setting(obj, r->target_revision, r->want_percent))
		return false;

	r->settled = isvc_settled(r, comp, ready);
	r->observed_at_ms = now_ms;
	r->latest_created_kn = mlplat_json_text(comp, "latestCreatedRevision", NULL, NULL);
	r->rolledout_kn = mlplat_json_text(comp, "latestRolledoutRevision", NULL, NULL);

	s = makeStringInfo();
	appendStringInfoChar(s, '{');
	appendStringInfoString(s, "\"observed_at\":");
	append_secs(s, now_ms);
	appendStringInfo(s, ",\"settled\":%s,\"ready\":%s",
					 r->settled ? "true" : "false", strcmp(ready, "True") == 0 ? "true" : "false");
	json_key_str(s, "latest_ready_kn", mlplat_json_text(comp, "latestReadyRevision", NULL, NULL));
	json_key_str(s, "latest_created_kn", r->latest_created_kn);
	json_key_str(s, "rolledout_kn", r->rolledout_kn);
	json_key_str(s, "load", mlplat_json_text(obj, "status", "modelStatus", "transitionStatus"));
	appendStringInfoString(s, ",\"traffic\":[");
	if (traffic && traffic->type == ML_JSON_ARRAY)
	{
		int n = 0;

		r->traffic = palloc0(sizeof(MlRolloutTraffic) * (traffic->u.array.count + 1));
		for (size_t i = 0; i < traffic->u.array.count; i++)
		{
			const MlJsonValue *t = traffic->u.array.items[i];
			const char *rev = mlplat_json_text(t, "revisionName", NULL, NULL);
			const MlJsonValue *pct = ml_json_object_get(t, "percent");
			const MlJsonValue *latest = ml_json_object_get(t, "latestRevision");

			if (rev == NULL)
				continue;
			r->traffic[r->ntraffic].revision = rev;
			r->traffic[r->ntraffic++].percent = pct && pct->type == ML_JSON_NUMBER ? (int) pct->u.number.value : 0;
			appendStringInfo(s, "%s{\"revision\":", n++ ? "," : "");
			escape_json(s, rev);
			appendStringInfo(s, ",\"percent\":%d,\"latest\":%s}",
							 pct && pct->type == ML_JSON_NUMBER ? (int) pct->u.number.value : 0,
							 latest && latest->type == ML_JSON_BOOL && latest->u.boolean ? "true" : "false");
		}
	}
	appendStringInfoChar(s, ']');
	r->obs = s;
	return true;
}

/*
 * PromQL for one number of one revision over the last `ms` milliseconds, or NULL
 * when the namespace or the revision name (from the InferenceService's status,
 * written by whoever can write that status) is not a DNS label: such a name is
 * never put into a query.
 */
static char *
promql(MlPromPreset preset, Metric m, const char *ns, const char *kn, int64 ms)
{
	char q[512];

	StaticAssertStmt((int) M_REQUESTS == (int) ML_PROM_REQUESTS && (int) M_ERRORS == (int) ML_PROM_ERRORS &&
						 (int) M_P95 == (int) ML_PROM_P95,
					 "metric order");
	if (!ml_prom_preset_query(preset, (MlPromMetric) m, ns, kn, (long long) ms, q, sizeof(q)))
		return NULL;
	return pstrdup(q);
}

/*
 * Append "metrics" to the observation: counts rounded to whole requests
 * (increase() extrapolates to the range boundaries), errors capped at
 * requests; every value Prometheus could not give is left out and named in
 * "gaps" — the evidence then has 0 requests / a null p95, which holds.
 */
static void
add_metrics(Rollout *r, MlJsonArena *arena)
{
	StringInfo s = r->obs;
	StringInfoData gaps;
	int ngaps = 0;

	initStringInfo(&gaps);
	appendStringInfoString(s, ",\"metrics\":{\"window_start\":");
	append_secs(s, r->metric_start_ms);
	appendStringInfoString(s, ",\"window_seconds\":");
	append_secs(s, r->metric_ms);
	if (!mlplat_observe_metrics_configured())
	{
		appendStringInfoString(&gaps, "\"no Prometheus configured (mlplat.prometheus_url)\"");
		ngaps++;
	}
	for (int w = 0; w < 2; w++)
	{
		double v[M_COUNT];
		bool have[M_COUNT];

		appendStringInfo(s, ",\"%s\":{", w == 0 ? "target" : "previous");
		if (r->bad_kn[w])
		{
			/* the name itself is not repeated: it is whatever the status said */
			appendStringInfoString(&gaps, ngaps++ ? "," : "");
			escape_json(&gaps, psprintf("%s revision name in the InferenceService status is not a DNS label: not queried",
										w == 0 ? "target" : "previous"));
		}
		for (int m = 0; m < M_COUNT; m++)
		{
			MlplatHttpRequest *q = r->prom[w][m];
			const char *why;

			have[m] = false;
			if (q == NULL)
				continue;
			if (mlplat_observe_metric_read(arena, q, &v[m], &why))
				have[m] = true;
			else
			{
				appendStringInfoString(&gaps, ngaps++ ? "," : "");
				escape_json(&gaps, psprintf("%s %s: %s", w == 0 ? "target" : "previous", metric_names[m], why));
			}
		}
		if (have[M_REQUESTS])
		{
			int64 req = ml_rollout_count(v[M_REQUESTS]);
			int64 err = have[M_ERRORS] ? Min(ml_rollout_count(v[M_ERRORS]), req) : 0;

			/* without an error count the requests cannot be judged: leave both out */
			if (have[M_ERRORS])
				appendStringInfo(s, "\"requests\":" INT64_FORMAT ",\"errors\":" INT64_FORMAT, req, err);
		}
		if (have[M_P95])
			appendStringInfo(s, "%s\"p95_ms\":%.3f", have[M_REQUESTS] && have[M_ERRORS] ? "," : "", v[M_P95]);
		appendStringInfoChar(s, '}');
	}
	appendStringInfo(s, ",\"gaps\":[%s]}", gaps.data);
}

/* The seam (seam.h): mlplat.rollout_claim read into Rollout */
MLPLAT_SEAM_STATIC(claim_seam, rollout_claim, Rollout);

/* mlplat.rollout_writeback: what a pass observed and applied, one row per rollout */
typedef struct RolloutWriteback
{
	MLPLAT_SEAM_MEMBERS_OUT(rollout_writeback)
} RolloutWriteback;

MLPLAT_SEAM_STATIC(writeback_seam, rollout_writeback, RolloutWriteback);

/* mlplat.rollout_writeback_result: the answer to a write-back or verdict row */
MLPLAT_SEAM_GLOBAL(mlplat_rollout_writeback_result_seam, rollout_writeback_result, MlplatRolloutResult);

MlplatSeam *const mlplat_rollouts_seams[] = {
	&claim_seam,
	&writeback_seam,
	&mlplat_rollout_writeback_result_seam,
	&mlplat_rollout_artifact_claim_seam,
	&mlplat_rollout_artifact_verdict_seam,
	&mlplat_artifact_claim_seam,
	NULL,
};

const char *
mlplat_rollout_result_of(List *answers, int64 id)
{
	ListCell *lc;

	foreach (lc, answers)
		if (((MlplatRolloutResult *) lfirst(lc))->id == id)
			return ((MlplatRolloutResult *) lfirst(lc))->result;
	return NULL;
}

List *
mlplat_rollout_writeback(MlplatSeamArray *rows, const char *sql, int64 epoch, MemoryContext cxt)
{
	return mlplat_seam_writeback_rows(rows, sql, epoch, &mlplat_rollout_writeback_result_seam, cxt,
									  sizeof(MlplatRolloutResult));
}

/* ---------------------------------------------------------------- I/O */

static List *
claim(MlplatPassWork *w)
{
	MlplatClaim c;
	ListCell *lc;

	mlplat_seam_claim_pass(w->pass, &claim_seam, "SELECT c FROM mlplat._rollouts_claim() c", 0, NULL, NULL,
						   sizeof(Rollout), true, 0, &c);
	mlplat_pass_work_claimed(w, c.instance, NULL);
	foreach (lc, c.rows)
	{
		Rollout *r = lfirst(lc);

		/* the deployment's own preset, else the setting's */
		if (!ml_prom_preset_from_name(r->metrics_preset, &r->preset))
			r->preset = (MlPromPreset) mlplat_metrics_preset;
		r->retry_ms = -1;
		if (c.notes != NIL)
			r->unanswered = mlplat_unanswered_find(c.notes, r->id, mlplat_object_path(r->namespace, r->name), NULL);
	}
	return c.rows;
}

static void
add_queries(MlplatHttpBatch *b, Rollout *r, int64 now_ms)
{
	const char *kn[2] = { r->target_kn, r->previous_kn };

	r->metrics = true;
	r->metric_start_ms = Max(r->window_start_ms, now_ms - (int64) r->window_seconds * 1000);
	r->metric_ms = now_ms - r->metric_start_ms;
	/*
	 * At 0% the first decision needs readiness only and comes at once: a range
	 * shorter than a second holds no scrape to count.
	 */
	if (r->metric_ms < 1000 || !mlplat_observe_metrics_configured())
		return;
	for (int w = 0; w < 2; w++)
	{
		if (kn[w] == NULL)
			continue;
		for (int m = 0; m < M_COUNT; m++)
		{
			char *query = promql(r->preset, (Metric) m, r->namespace, kn[w], r->metric_ms);

			if (query == NULL)
			{
				r->bad_kn[w] = true;
				break;
			}
			r->prom[w][m] = mlplat_observe_metric(b, query, now_ms);
		}
	}
}

static MlplatSpan *
rollout_span_at(Rollout *r, const char *name, MlplatSpanKind kind, TimestampTz start)
{
	MlplatSpan *s = mlplat_span_begin_at(r->traceparent, name, kind, start);

	mlplat_span_set_entity(s, r->project, "rollout", r->id);
	mlplat_span_attr_text(s, "k8s.namespace.name", r->namespace);
	mlplat_span_attr_text(s, "mlplat.deployment", r->name);
	mlplat_span_attr_int(s, "mlplat.revision", r->target_revision);
	return s;
}

static TimestampTz
epoch_ms_to_timestamptz(int64 ms)
{
	return (TimestampTz) (ms - ((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY * 1000)) * 1000;
}

/*
 * The spans of what a pass did for a rollout, in the trace of its last intent
 * (start_rollout, promote_rollout, abort_rollout): the traffic apply, the
 * Prometheus queries of a decision, and the decision itself (from the end of
 * its window to its ledger row).  Every GET while KServe settles is left out:
 * there are many and they decide nothing.  result: what _rollouts_observe said.
 */
static List *
rollout_spans(Rollout *r, const char *result)
{
	List *spans = NIL;
	MlplatSpan *s;

	if (r->apply && r->apply->started_at)
	{
		s = rollout_span_at(r, "rollouts.apply", MLPLAT_SPAN_CLIENT, r->apply->started_at);
		/* absent when the apply removes the canary setting (promotion) */
		if (r->want_percent >= 0)
			mlplat_span_attr_int(s, "mlplat.canary_traffic_percent", r->want_percent);
		mlplat_span_end_request(s, r->apply, r->apply->status, r->applied ? NULL : r->error);
		spans = lappend(spans, s);
	}
	if (r->metrics)
	{
		TimestampTz first = 0,
					last = 0;
		int n = 0;

		for (int w = 0; w < 2; w++)
			for (int m = 0; m < M_COUNT; m++)
			{
				MlplatHttpRequest *q = r->prom[w][m];
				TimestampTz end;

				if (q == NULL || q->started_at == 0)
					continue;
				end = q->started_at + (TimestampTz) (q->elapsed_ms * 1000.0);
				first = (n == 0 || q->started_at < first) ? q->started_at : first;
				last = Max(last, end);
				n++;
			}
		if (n > 0)
		{
			s = rollout_span_at(r, "rollouts.metrics", MLPLAT_SPAN_CLIENT, first);
			mlplat_span_attr_int(s, "mlplat.prometheus.queries", n);
			mlplat_span_attr_int(s, "mlplat.window_ms", r->metric_ms);
			mlplat_span_end_at(s, last, NULL);
			spans = lappend(spans, s);
		}
	}
	if (strcmp(result, "ADVANCE") == 0 || strcmp(result, "HOLD") == 0 || strcmp(result, "ROLLBACK") == 0)
	{
		s = rollout_span_at(r, "rollouts.decide", MLPLAT_SPAN_INTERNAL,
							r->decide_at_ms > 0 ? epoch_ms_to_timestamptz(r->decide_at_ms) : GetCurrentTimestamp());
		mlplat_span_attr_text(s, "mlplat.rollout.decision", result);
		mlplat_span_end(s, NULL);
		spans = lappend(spans, s);
	}
	return spans;
}

/*
 * A due decision (src/rollout/pass_plan.c): the evidence record of this
 * observation and its content id, plan_rollout's transition on it and the
 * rollout's status after it, from the claimed contract, fraction and replica
 * counts.  The observation is this pass's own text, read back as the tree
 * the evidence is written from.
 */
static void
plan(Rollout *r, MlJsonArena *arena)
{
	MlJsonError err;
	MlRolloutPassPlanIn in = {
		.contract = r->contract ? ml_json_parse(arena, r->contract, strlen(r->contract), NULL, &err) : NULL,
		.fraction = r->fraction,
		.target_replicas = r->target_replicas,
		.previous_replicas = r->previous_replicas,
		.observation = ml_json_parse(arena, r->obs->data, r->obs->len, NULL, &err),
		.target_kn = r->decision.target_kn,
		.previous_kn = r->decision.previous_kn,
		.window_seconds = r->window_seconds,
		.observed_at_ms = r->observed_at_ms,
	};

	r->plan = palloc(sizeof(MlRolloutPassPlan));
	if (in.observation == NULL)
		elog(ERROR, "mlplat: the rollout observation of this pass is not JSON: %s", err.message);
	if (ml_rollout_pass_plan(arena, &in, r->plan) != ML_ROLLOUT_OK)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
}

/*
 * What this pass's observation means for the claimed row (rollout_decide.c):
 * decided here, after the claim, from the claim's fields and what
 * observe_object read; the write-back applies it under the compare-and-swap
 * that proves the row unchanged since the claim.  Nothing to decide for a
 * rollout this pass applied to or could not observe (the write-back records
 * that instead).
 */
static void
decide(Rollout *r, MlJsonArena *arena)
{
	MlRolloutPassIn in = {
		.status = (MlplatRolloutStatus) r->status,
		.request = ml_rollout_request_of(r->requested_action),
		.fraction = r->fraction,
		.target_kn = r->target_kn,
		.previous_kn = r->previous_kn,
		.window_started = r->window_started,
		/* a NULL decide_at reads as 0, which no observation is before */
		.has_decide_at = true,
		.decide_at_ms = r->decide_at_ms,
		.window_seconds = r->window_seconds,
		.observed_at_ms = r->observed_at_ms,
		.settled = r->settled,
		.latest_created_kn = r->latest_created_kn,
		.rolledout_kn = r->rolledout_kn,
		.traffic = r->traffic,
		.ntraffic = r->ntraffic,
		.has_metrics = r->metrics,
	};

	if (r->obs == NULL || r->applied || r->error != NULL)
		return;
	ml_rollout_pass_decide(&in, &r->decision);
	r->decided = true;
	if (r->decision.step == ML_ROLLOUT_STEP_DECIDE)
		plan(r, arena);
}

static void
write_back(MlplatPass *pass, List *rollouts, int *decisions)
{
	MemoryContext pass_cxt = CurrentMemoryContext;
	ListCell *lc;
	List *spans = NIL;
	List *answers;
	MlplatWriteNotes settled = { 0 };
	MlplatLedgerBatch *ledger;

	mlplat_txn_begin();
	ledger = mlplat_ledger_batch_new();
	foreach (lc, rollouts)
	{
		Rollout *r = lfirst(lc);

		/*
		 * this leader's notes of the object once answered; an earlier leader's only by a
		 * sight (every note of the object; an adopted one by itself) or the grace
		 */
		if (r->answered)
			mlplat_write_notes_answered(&settled, r->id, mlplat_object_path(r->namespace, r->name), NULL,
										mlplat_write_made(r->http_status));
		if (r->settle_note)
			mlplat_write_notes_add(&settled, r->id, mlplat_object_path(r->namespace, r->name), NULL);
		else if (r->adopt)
			mlplat_write_notes_add(&settled, r->id, mlplat_object_path(r->namespace, r->name), r->unanswered->action);
		if (r->adopt)
			mlplat_ledger_batch_add(ledger, "rollout", r->id, r->project, "ADOPT", "OK", NULL, NULL, 0, NULL, NULL,
									r->adopt_percent < 0 ? "found canaryTrafficPercent removed by an apply whose answer was never recorded"
														 : psprintf("found canaryTrafficPercent %d applied by an apply whose answer was never recorded",
																	r->adopt_percent));
	}
	{
		MlplatSeamArray *rows = mlplat_seam_array_new(&writeback_seam);

		foreach (lc, rollouts)
		{
			Rollout *r = lfirst(lc);
			RolloutWriteback w = {
				.id = r->id,
				.row_version = r->row_version,
				.controller = pass->controller,
				.observation = r->obs ? r->obs->data : NULL,
				.applied = r->applied,
				.applied_percent = r->want_percent,
				.error = r->error,
				.retry_ms = r->retry_ms,
				.close_status = MLPLAT_NO_STATUS,
				.window_start_ms = -1,
				.decide_at_ms = -1,
			};

			if (r->decided)
			{
				const MlRolloutPassDecision *d = &r->decision;

				w.step = ml_rollout_step_name(d->step);
				w.target_kn = d->target_kn;
				w.previous_kn = d->previous_kn;
				w.target_percent = d->target_percent;
				w.previous_percent = d->previous_percent;
				w.close_kn = d->close_kn;
				if (d->step == ML_ROLLOUT_STEP_CLOSE)
					w.close_status = d->close_status;
				w.status_reason = d->status_reason[0] ? d->status_reason : NULL;
				w.clear_window = d->clear_window;
				if (d->start_window)
				{
					w.window_start_ms = d->window_start_ms;
					w.decide_at_ms = d->decide_at_ms;
				}
			}
			w.plan_status = MLPLAT_NO_STATUS;
			w.recheck_at_ms = -1;
			if (r->plan)
			{
				const MlRolloutPassPlan *p = r->plan;

				w.evidence = p->evidence;
				w.refused = p->refused ? p->refusal : NULL;
				if (!p->refused)
				{
					w.plan = p->plan.json;
					w.decision = p->decision;
					/*
					 * typed, as the ledger stores them: the reasons in the plan's order
					 * (byte order of the names, which is how SQL sorted them before),
					 * the fraction as the plan's decimal text, read by numeric_in
					 */
					for (size_t i = 0; i < p->nreasons; i++)
						w.reasons = lappend(w.reasons, (char *) p->reasons[i]);
					w.next_fraction = p->next_fraction;
					w.plan_status = p->after.status;
					w.plan_reason = p->after.status_reason;
					w.keep_window = p->after.keep_window;
					if (p->after.keep_window)
						w.recheck_at_ms = p->after.decide_at_ms;
				}
			}

			if (r->seen.get != NULL || r->apply != NULL)
				mlplat_seam_array_add(rows, &w);
		}
		answers = mlplat_rollout_writeback(rows, "SELECT r FROM mlplat._rollouts_writeback_set($1, $2) r",
										   pass->epoch, pass_cxt);
	}
	foreach (lc, rollouts)
	{
		Rollout *r = lfirst(lc);
		const char *res;

		if (r->seen.get == NULL && r->apply == NULL)
			continue;
		res = mlplat_rollout_result_of(answers, r->id);
		/* spans go with a write-back that held; the lists live in the pass's context */
		if (res && strcmp(res, "LOST") != 0)
		{
			MemoryContext txn_cxt = MemoryContextSwitchTo(pass_cxt);

			spans = list_concat(spans, rollout_spans(r, res));
			MemoryContextSwitchTo(txn_cxt);
		}
		if (res && (strcmp(res, "ADVANCE") == 0 || strcmp(res, "HOLD") == 0 || strcmp(res, "ROLLBACK") == 0))
			(*decisions)++;
		r->moved = res && (strcmp(res, "ADVANCE") == 0 || strcmp(res, "ROLLBACK") == 0);
		/*
		 * What went out to the cluster is in the reconcile ledger, like every
		 * reconciler's writes — also when the row moved on meanwhile (the
		 * apply happened all the same); a deposed leader's row is refused there.
		 */
		if (r->not_ours)
			mlplat_ledger_batch_add(ledger, "rollout", r->id, r->project, "ADOPT", "CONFLICT", NULL, NULL, 0, r->error,
									NULL, mlplat_object_path(r->namespace, r->name));
		if (r->apply)
			mlplat_ledger_batch_add(ledger, "rollout", r->id, r->project, "APPLY",
									r->applied ? "OK" : r->retry_ms == MLPLAT_PERMANENT_RETRY_MS ? "FAILED"
																								 : "RETRY",
									NULL, NULL, r->http_status, r->ledger_error ? r->ledger_error : r->error, NULL,
									r->want_percent < 0 ? "canaryTrafficPercent removed"
														: psprintf("canaryTrafficPercent %d", r->want_percent));
	}
	mlplat_seam_writeback_end(pass, ledger, &settled, spans, pass_cxt, 0);
}

/* libcurl write path of a watch: the first complete event line is all we wait for */
static bool
watch_event(void *arg, const char *data, size_t len)
{
	if (memchr(data, '\n', len) == NULL)
		return true;
	*(bool *) arg = true;
	return false; /* stop reading: the next pass reads the object itself */
}

/*
 * Wait (at most WATCH_S) for one of the InferenceServices of `rollouts` to
 * change after the version this pass saw, or for a wake-up, and return how
 * soon the next pass should come: at once after a change, a wake-up or a full
 * watch; SETTLE_POLL_MS when a watch failed early (then polling is what is
 * left).
 */
static long
watch_settling(List *rollouts)
{
	MlplatHttpBatch *b = mlplat_http_batch_create(CurrentMemoryContext);
	struct timespec t0,
		t1;
	ListCell *lc;
	long ms;
	bool early = false;

	mlplat_http_batch_first_only(b);
	foreach (lc, rollouts)
	{
		Rollout *r = lfirst(lc);

		r->watch = mlplat_kube_watch(b, &ISVC, r->namespace, r->name, r->rv, WATCH_S);
		r->watch->timeout_ms = WATCH_S * 1000 + WATCH_SLACK_MS;
		r->watch->sink = watch_event;
		r->watch->sink_arg = &r->changed;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	mlplat_http_batch_run(b);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (long) ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000);
	foreach (lc, rollouts)
	{
		Rollout *r = lfirst(lc);

		if (r->changed)
			return 1;
		/* ended without an event and not cut short by this batch: refused or broken */
		if (r->watch->done && !(r->watch->failed && strcmp(r->watch->error, "interrupted before completion") == 0))
			early = true;
	}
	return early && ms < WATCH_S * 1000 ? SETTLE_POLL_MS : 1;
}

/* Is the rollout id in the list (of palloc'd int64)? */
static bool
id_in(List *ids, int64 id)
{
	ListCell *lc;

	foreach (lc, ids)
	{
		if (*(int64 *) lfirst(lc) == id)
			return true;
	}
	return false;
}

/*
 * Judge each object observed (issue 18, finding 5): the rollout
 * writes the deployment's InferenceService only when it carries mlplat's labels
 * and the content id of one of the deployment's revisions — the target's it
 * applies, or the one the deployments reconciler applied before.  Anything
 * else is reported (last_error, ledger ADOPT CONFLICT) and not touched.
 */
static void
judge_found(MlplatPassWork *w, List *rollouts)
{
	MlJsonArena *arena = w->arena;
	List *owners = NIL;
	ListCell *lc;

	foreach (lc, rollouts)
	{
		Rollout *r = lfirst(lc);
		MlJsonError err;
		const MlJsonValue *want;
		MlplatIsvcOwner *o;

		if (r->seen.obj == NULL)
			continue;
		want = ml_json_parse(arena, r->spec, strlen(r->spec), NULL, &err);
		o = palloc0(sizeof(MlplatIsvcOwner));
		o->ns = r->namespace;
		o->name = r->name;
		o->obj = r->seen.obj;
		o->own_content_id = want ? mlplat_object_content_id(want) : NULL;
		o->row = r;
		owners = lappend(owners, o);
	}
	mlplat_isvc_judge(owners, w->instance);
	foreach (lc, owners)
	{
		MlplatIsvcOwner *o = lfirst(lc);
		Rollout *r = o->row;

		if (o->not_ours == NULL)
			continue;
		r->not_ours = true;
		r->error = psprintf("InferenceService %s/%s exists but is not this deployment's: %s; not adopted, not touched",
							r->namespace, r->name, o->not_ours);
		r->retry_ms = mlplat_retry_ms(true, r->attempts, r->id, 0);
	}
}

/*
 * Observe (observe.h): GET the InferenceService of each due rollout that was
 * not just moved (one batch, with the HEADs of the target artifacts the gate
 * verifies before a first apply), read each answer once, judge what was found,
 * and derive from an object of ours what the write-back's SQL judges (its
 * resourceVersion, the setting it carries, the observation).  What follows
 * reads only r->seen, r->not_ours, r->carries and r->obs.  Returns when it
 * observed, in ms since the Unix epoch.
 */
static int64
observe(MlplatPassWork *w, List *rollouts, List *moved, List **gate)
{
	MlplatHttpBatch *gets = mlplat_http_batch_create(w->cxt);
	struct timespec ts;
	int64 now_ms;
	ListCell *lc;

	foreach (lc, rollouts)
	{
		Rollout *r = lfirst(lc);

		/* the second round is for the moved ones; the others were just looked at */
		if (!r->due || moved != NIL)
			continue;
		mlplat_observe_get(&r->seen, gets, &ISVC, r->namespace, r->name);
		*gate = mlplat_rollout_artifacts_add(*gate, r->id, r->row_version, r->attempts, r->project);
	}
	/*
	 * The target's artifact is verified before its first apply: HEADs join the
	 * GETs.  A moved rollout needs no check: a decision was made on its target.
	 */
	mlplat_rollout_artifacts_begin(*gate, gets);
	mlplat_http_batch_run(gets);
	mlplat_rollout_artifacts_finish(w->pass, *gate);
	foreach (lc, rollouts)
	{
		Rollout *r = lfirst(lc);

		/* held: not verified (yet), nothing of it is read */
		if (r->seen.get != NULL && !mlplat_rollout_artifacts_held(*gate, r->id))
			mlplat_observe_got(&r->seen, w->arena);
	}
	judge_found(w, rollouts);

	clock_gettime(CLOCK_REALTIME, &ts);
	now_ms = (int64) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	foreach (lc, rollouts)
	{
		Rollout *r = lfirst(lc);

		if (r->seen.obj == NULL || r->not_ours)
			continue;
		r->rv = mlplat_json_text(r->seen.obj, "metadata", "resourceVersion", NULL);
		r->carries = observe_object(r, r->seen.obj, now_ms);
	}
	return now_ms;
}

/*
 * One round: claim, observe, apply or decide, write back.  `moved` lists the
 * rollouts whose split a decision of the previous round just changed: their
 * object is known to carry the old split, so the new one is applied without
 * reading it first.  Returns the rollouts a decision of this round moved.
 */
static List *
rollouts_round(MlplatPass *pass, List *moved)
{
	MlplatPassWork w;
	MlJsonArena *arena;
	List *rollouts;
	MlplatHttpBatch *acts;
	ListCell *lc;
	int64 now_ms;
	struct timespec ts;
	long wait_ms = -1;
	int decisions = 0;
	List *moved_now = NIL;
	List *gate = NIL;
	List *settling = NIL;
	int nsettling = 0;

	/* a round's status line is its own: the second round's replaces the first's */
	pass->status[0] = '\0';
	mlplat_pass_work_begin(&w, pass);
	arena = w.arena;
	rollouts = claim(&w);
	if (rollouts == NIL)
	{
		snprintf(pass->status, sizeof(pass->status), "no active rollouts");
		return NIL;
	}

	acts = w.batch;
	/* a moved rollout's object is known to carry the old split: the new one is applied unread */
	foreach (lc, rollouts)
	{
		Rollout *r = lfirst(lc);

		if (r->due && id_in(moved, r->id))
			r->apply = mlplat_kube_apply(acts, &ISVC, r->namespace, r->name, r->spec);
	}
	now_ms = observe(&w, rollouts, moved, &gate);

	foreach (lc, rollouts)
	{
		Rollout *r = lfirst(lc);
		const MlplatKubeResult *kr = &r->seen.res;

		if (r->seen.get == NULL)
			continue;
		if (mlplat_rollout_artifacts_held(gate, r->id))
		{
			/* not verified (yet): nothing is applied, and the gate wrote the row back */
			r->seen.get = NULL;
			continue;
		}
		if (kr->outcome == MLPLAT_KUBE_NOT_FOUND)
		{
			/* the object is created by the apply; KServe keeps nothing to roll back to then */
			r->apply = mlplat_kube_apply(acts, &ISVC, r->namespace, r->name, r->spec);
			continue;
		}
		if (kr->outcome != MLPLAT_KUBE_OK)
		{
			r->error = psprintf("cannot read InferenceService %s/%s: %s", r->namespace, r->name,
								mlplat_kube_tenant_line(kr) ? mlplat_kube_tenant_line(kr) : "unknown error");
			if (kr->tenant_message)
				r->ledger_error = psprintf("cannot read InferenceService %s/%s: %s", r->namespace, r->name,
										   kr->message);
			r->http_status = kr->status;
			r->retry_ms = mlplat_retry_ms(false, r->attempts, r->id, kr->retry_after_s);
			continue;
		}
		if (r->seen.obj == NULL)
		{
			r->error = psprintf("InferenceService %s/%s is not JSON", r->namespace, r->name);
			r->retry_ms = MLPLAT_PERMANENT_RETRY_MS;
			continue;
		}
		if (r->not_ours)
			continue; /* reported by judge_found; nothing applied, nothing observed */
		if (!r->carries)
		{
			/*
			 * Not the wanted setting, but the one an unanswered apply sent before an intent
			 * changed it (an abort or a promotion while the answer was lost): that apply
			 * landed, and is recorded (ADOPT) before the apply that replaces it.
			 */
			if (r->unanswered && noted_percent(r->unanswered, r->want_percent) != r->want_percent &&
				carries_setting(r->seen.obj, r->target_revision, noted_percent(r->unanswered, r->want_percent)))
			{
				r->adopt = true;
				r->adopt_percent = noted_percent(r->unanswered, r->want_percent);
			}
			r->apply = mlplat_kube_apply(acts, &ISVC, r->namespace, r->name, r->spec);
			continue;
		}
		/* the wanted setting is there: an apply whose answer was never recorded made it */
		if (r->unanswered && mlplat_unanswered_seen_settles(r->unanswered))
		{
			r->adopt = r->settle_note = true;
			r->adopt_percent = r->want_percent;
		}
		else if (r->unanswered && mlplat_unanswered_settled(r->unanswered))
			r->settle_note = true; /* overtaken, and past the grace */
		/* a decision is due: gather the window's request metrics with it */
		if (r->settled && r->window_start_ms > 0 && r->decide_at_ms > 0 && now_ms >= r->decide_at_ms &&
			r->want_percent >= 0 && r->status != MLPLAT_ROLLOUT_ROLLING_BACK && r->target_kn != NULL)
			add_queries(acts, r, now_ms);
	}
	/* the write-ahead: every apply is on record before it is sent */
	foreach (lc, rollouts)
	{
		Rollout *r = lfirst(lc);

		if (r->apply)
		{
			mlplat_write_notes_add(&w.sending, r->id, mlplat_object_path(r->namespace, r->name),
								   apply_note(r->want_percent));
			w.creates++;
		}
	}
	if (!mlplat_pass_work_notes_commit(&w, "applies"))
		return NIL;
	mlplat_http_batch_run(acts);

	foreach (lc, rollouts)
	{
		Rollout *r = lfirst(lc);

		if (r->apply)
		{
			MlplatKubeResult kr;

			mlplat_kube_parse_response_in(r->apply, arena, &kr);
			r->http_status = kr.status;
			if (mlplat_write_answered(kr.status))
				r->answered = true;
			if (kr.outcome == MLPLAT_KUBE_OK)
			{
				r->applied = true;
				/* the applied object's version, to watch from (no watch without it) */
				r->rv = mlplat_json_text(kr.body, "metadata", "resourceVersion", NULL);
			}
			else
			{
				r->error = psprintf("apply of InferenceService %s/%s failed: %s", r->namespace, r->name,
									mlplat_kube_tenant_line(&kr) ? mlplat_kube_tenant_line(&kr) : "unknown error");
				if (kr.tenant_message)
					r->ledger_error = psprintf("apply of InferenceService %s/%s failed: %s", r->namespace, r->name,
											   kr.message);
				r->retry_ms = kr.outcome == MLPLAT_KUBE_FAILED
								  ? mlplat_retry_ms(true, r->attempts, r->id, 0)
								  : mlplat_retry_ms(false, r->attempts, r->id, kr.retry_after_s);
			}
		}
		else if (r->metrics)
			add_metrics(r, arena);
		if (r->obs)
			appendStringInfoChar(r->obs, '}');
		decide(r, arena);
	}

	write_back(pass, rollouts, &decisions);

	/*
	 * Come back soon while KServe settles; exactly when a window ends (the
	 * decision is due then, and every millisecond slept past it is overhead
	 * on the rollout); at most a second later otherwise (an entity in backoff
	 * comes due by then).
	 */
	clock_gettime(CLOCK_REALTIME, &ts);
	now_ms = (int64) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	foreach (lc, rollouts)
	{
		Rollout *r = lfirst(lc);
		long ms = ACTIVE_POLL_MS;

		if (r->moved)
			ms = 1; /* applied by the second round, or else the next pass */
		else if (r->applied || (r->obs && !r->settled))
		{
			/* waiting for KServe: watched below */
			nsettling++;
			if (r->error == NULL && r->rv != NULL)
			{
				settling = lappend(settling, r);
				continue;
			}
			ms = SETTLE_POLL_MS;
		}
		else if (r->window_start_ms == 0 || r->metrics)
			ms = SETTLE_POLL_MS;
		else if (r->decide_at_ms > 0)
			ms = (long) Max(1, Min(ACTIVE_POLL_MS, r->decide_at_ms - now_ms + 1));
		if (wait_ms < 0 || ms < wait_ms)
			wait_ms = ms;
	}
	/* every one of them watchable (a version known), else look by GET as before */
	if (settling != NIL && list_length(settling) == nsettling && (wait_ms < 0 || wait_ms >= WATCH_S * 1000))
		wait_ms = watch_settling(settling);
	else if (nsettling > 0 && (wait_ms < 0 || wait_ms > SETTLE_POLL_MS))
		wait_ms = SETTLE_POLL_MS;
	pass->next_pass_ms = wait_ms;
	/* the applies are the status line's creates */
	mlplat_pass_work_status(&w, NULL, "%d active rollouts, %d decisions", list_length(rollouts), decisions);
	foreach (lc, rollouts)
	{
		Rollout *r = lfirst(lc);

		if (r->moved)
		{
			int64 *id = palloc(sizeof(int64));

			*id = r->id;
			moved_now = lappend(moved_now, id);
		}
	}
	return moved_now;
}

void
mlplat_rollouts_pass(MlplatPass *pass)
{
	List *moved = rollouts_round(pass, NIL);

	/*
	 * A decision that moved the split is applied at once, in a second round
	 * of the same pass: the readiness of the new split (and with it the next
	 * window) waits for nothing else.
	 */
	if (moved != NIL)
		(void) rollouts_round(pass, moved);
}

/* ---------------------------------------------------------------- SQL test hook */

PG_FUNCTION_INFO_V1(mlplat_prometheus_classify);

/*
 * mlplat._prometheus_classify(http_status int, body text) → jsonb
 * {"outcome": ..., "value": n | null, "why": ...}: how one Prometheus answer is read.
 */
Datum
mlplat_prometheus_classify(PG_FUNCTION_ARGS)
{
	int status = PG_GETARG_INT32(0);
	text *body = PG_ARGISNULL(1) ? NULL : PG_GETARG_TEXT_PP(1);
	MlJsonArena *arena = mlplat_json_arena_in(CurrentMemoryContext);
	MlPromResult res;
	StringInfoData s;

	(void) ml_prom_parse_instant(arena, status, body ? VARDATA_ANY(body) : NULL,
								 body ? VARSIZE_ANY_EXHDR(body) : 0, &res);
	initStringInfo(&s);
	appendStringInfo(&s, "{\"outcome\":\"%s\",\"value\":", ml_prom_outcome_name(res.outcome));
	if (res.outcome == ML_PROM_VALUE)
		appendStringInfo(&s, "%.17g", res.value);
	else
		appendStringInfoString(&s, "null");
	appendStringInfoString(&s, ",\"why\":");
	escape_json(&s, res.why);
	appendStringInfoChar(&s, '}');
	PG_RETURN_DATUM(DirectFunctionCall1(jsonb_in, CStringGetDatum(s.data)));
}
