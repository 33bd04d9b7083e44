/*
 * deployments.c — the deployments reconciler: KServe InferenceServices.
 *
 * One pass:
 *   1. claim: read the live deployments that changed (an intent not yet
 *      applied, a state waiting on KServe) or whose own resync is due
 *      (next_resync_at, spread over mlplat.resync_interval), with their desired
 *      revision's rendered manifest (short transaction, committed before any
 *      HTTP).  A full pass — a new leader's first, then one every
 *      mlplat.full_resync_interval — reads every live deployment instead.
 *      Either way at most mlplat.pass_row_limit rows, the most overdue first
 *      (a full pass: a sweep in id order, one chunk a pass); a claim that comes
 *      back full is followed by the next pass at once;
 *   2. observe: a full pass, or one with more than OBSERVE_GET_MAX rows, LISTs
 *      InferenceServices carrying our managed-by and instance labels across
 *      all namespaces, 500 a page; any other GETs just the rows it read.  With
 *      mlplat.deployments_watch, a watch-fed cache (watch_cache.h) stands in
 *      for both while it is healthy, and its events make their rows due;
 *   3. decide per deployment (pure: deployment_decide), then run every apply
 *      (Server-Side Apply, force) and delete concurrently in one batch; the
 *      first apply of a revision waits for its artifact check (artifact.c),
 *      whose requests join that batch, and is applied in a second one, whose
 *      answered applies are written back in parts of APPLIED_PART_ROWS while
 *      the rest are in flight (the last part after it);
 *   4. write back in a new short transaction: compare-and-swap on the row
 *      version and the leader epoch, plus a ledger row per external write —
 *      one statement for all rows, one for the ledger, one for the spans, and
 *      one moving on the next resync of the rows read and left unwritten.
 * Orphans (our objects with no live deployment, as the database says: not
 * among this chunk is not "no row") are judged by a sweep's first chunk, or
 * by a pass that reads the watch cache once its events showed one.
 * Nothing is remembered between passes but the write-ahead notes of writes
 * not yet answered (unanswered.h): an apply whose leader ended before its
 * write-back may have made an InferenceService, or may still make one, so a
 * DELETING deployment is DELETED only once no such apply can land, and one
 * found is adopted in the ledger.  A pass in which nothing changed writes nothing.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "pgstat.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "mlplat/artifact.h"
#include "mlplat/backoff.h"
#include "mlplat/canonical.h"
#include "mlplat/guc.h"
#include "mlplat/http.h"
#include "mlplat/isvc_owner.h"
#include "mlplat/json.h"
#include "mlplat/kube.h"
#include "mlplat/labels.h"
#include "mlplat/ledger.h"
#include "mlplat/observe.h"
#include "mlplat/pass_text.h"
#include "mlplat/pass_work.h"
#include "mlplat/reconcile.h"
#include "mlplat/reconcile_sql.h"
#include "mlplat/retry.h"
#include "mlplat/seam.h"
#include "mlplat/span.h"
#include "mlplat/spec_diff.h"
#include "mlplat/unanswered.h"
#include "mlplat/watch_cache.h"

static const MlplatKubeResource ISVC = { "serving.kserve.io", "v1beta1", "inferenceservices", true };

/* how soon to look again while waiting on KServe (readiness, deletion) */
#define FOLLOW_UP_MS 300
/*
 * A pass that reads at most this many rows observes them with a GET each (one
 * batch); more, and one LIST of the fleet (500 a page) is the cheaper look.
 */
#define OBSERVE_GET_MAX 64

/* what of an InferenceService the watch cache and every fleet-wide LIST keep (below) */
static MlJsonValue *isvc_compared(MlJsonArena *arena, const MlJsonValue *obj);

/* the epoch whose leader ran its first full pass, and when the last full pass began */
static int64 full_epoch = -1;
static TimestampTz last_full = 0;

/*
 * A full pass acts on mlplat.pass_row_limit rows at most: it is a sweep of
 * chunks in id order, one pass each, the next at once while a chunk comes
 * back full.  sweep_after: the last id of the previous chunk (0: a sweep
 * starts); sweep_epoch: the leadership it belongs to; sweep_start: when it
 * began (last_full once it is done).  orphans_due: the next pass that sees the
 * whole fleet (a sweep's first chunk, or any pass observing from the watch
 * cache) judges orphans, asking the database which objects no live row owns.
 */
static int64 sweep_after = 0;
static int64 sweep_epoch = -1;
static TimestampTz sweep_start = 0;
static bool orphans_due = true;
/* the last pass was a chunk of a sweep: the next one is not (see mlplat_deployments_pass) */
static bool swept_last = false;

/*
 * The watch cache (mlplat.deployments_watch; watch_cache.h): InferenceServices
 * by selector, filled at a leader's start and kept current by a watch across
 * passes.  watch_epoch: the epoch it was filled for (a new leadership lists
 * again); watch_instance: the selector's instance, known from a claim.
 */
static MlplatWatchCache *isvc_cache = NULL;
static int64 watch_epoch = -1;
static char *watch_instance = NULL;
/* "namespace/name" of what the watch saw change this pass (the pass's memory) */
static List *watch_changed = NIL;

typedef enum DepAction
{
	DEP_NONE = 0, /* nothing to do (or only a status write) */
	DEP_APPLY,	  /* apply the desired revision */
	DEP_REPAIR,	  /* re-apply the same revision over drift */
	DEP_DELETE	  /* delete the InferenceService */
} DepAction;

typedef struct Deployment
{
	/*
	 * claimed: the attributes of mlplat.deployment_claim (51_reconcile_deployments.sql
	 * says what they are); seen_*: what KServe showed in the answer to this revision's
	 * first apply (observed.kserve_at_apply): its status is ours once it moved past that.
	 */
	MLPLAT_SEAM_MEMBERS(deployment_claim)
	bool drift_report; /* drift policy 'report': observe only, never repair */
	char *seen_json;   /* this pass's apply answer, to record; NULL: keep */
	/* observed.terminating: {"since", "finalizers"} or null; NULL: not observed this pass */
	char *terminating_json;
	/* observed.deployment_mode: KServe's status.deploymentMode, as JSON; NULL: not seen this pass */
	char *mode_json;
	/* observed */
	const MlJsonValue *obj;
	const MlplatUnanswered *unanswered; /* an apply to it never answered */
	MlplatObservedObject probe;			/* GET before a first apply that saw no object (probe.get NULL: none) */
	bool look;							/* to be looked at before that apply (look_before_apply) */
	const MlJsonValue *probe_obj;		/* what the probe or LIST found under the name, or NULL */
	char *not_ours;						/* the object under its name is not its own: why */
	const MlJsonValue *desired;			/* spec parsed (by judge_found), or NULL */
	bool probe_failed;					/* the probe got no usable answer: apply nothing yet */
	/* decided */
	DepAction action;
	bool adopt;		  /* found what an unanswered apply made: ledger ADOPT */
	bool answered;	  /* req got an answer: remove its own note */
	bool settle_note; /* the unanswered apply is resolved: remove its note */
	MlplatHttpRequest *req;
	MlplatDeploymentStatus new_status;
	char *reason;
	char *endpoint;
	bool mark_observed; /* observed_generation := generation */
	char *error;
	int retry_ms; /* -1: no retry */
	bool write;
	char *drift;	   /* ledger note: "drift at <paths>", or why it was adopted */
	char *drift_paths; /* every differing path, a JSON array; NULL when not compared */
	const char *ledger_action;
	const char *ledger_outcome;
	int http_status;
	/* trace: this pass's spans, written with the write-back (dep_span) */
	TimestampTz claim_start;
	TimestampTz claim_end;
	List *spans;
	bool claim_traced;
	MlplatSpan *req_span; /* the span of req */
	/* the artifact check before the first apply of a revision */
	bool first_apply;
	MlplatArtifactCheck *check;
	MlplatSpan *check_span;
	bool written_back;			/* its apply's answer was written back during the batch (apply_checked) */
	const char *ledger_desired; /* ledger digests and note, when not the spec's */
	const char *ledger_observed;
	char *ledger_note;
	char *ledger_error; /* the ledger's error when the row's last_error is the tenant's version */
} Deployment;

typedef struct DepByName
{
	char key[NAMEDATALEN * 2]; /* "namespace/name" */
	Deployment *d;
} DepByName;

/*
 * The seam (seam.h): mlplat.deployment_claim, the rows _deployments_claim
 * returns, read into Deployment; mlplat.deployment_writeback, the rows
 * _deployments_writeback_set takes, built from DeploymentWriteback.
 */
MLPLAT_SEAM_STATIC(claim_seam, deployment_claim, Deployment);

/* one row of a write-back; a negative number is NULL (keep the stored value, or no retry) */
MLPLAT_SEAM_ROW_STATIC(writeback_seam, deployment_writeback, DeploymentWriteback);

/* the artifact check's claim is read through a seam too (artifact.c) */
MlplatSeam *const mlplat_deployments_seams[] = { &claim_seam, &writeback_seam, &mlplat_artifact_claim_seam, NULL };

/* ---------------------------------------------------------------- pure decisions */

/*
 * What a StringInfo built, in a chunk of its own length: a pass keeps a few
 * such texts for each of its rows until their write-back, each in
 * initStringInfo's 1 kB otherwise.
 */
static char *
text_kept(StringInfo s)
{
	char *t = pstrdup(s->data);

	pfree(s->data);
	return t;
}

/* The predictor's status in an InferenceService (KServe's components.predictor), or NULL. */
static const MlJsonValue *
isvc_predictor_status(const MlJsonValue *obj)
{
	return ml_json_object_get(ml_json_object_get(ml_json_object_get(obj, "status"), "components"),
							  "predictor");
}

/*
 * Does KServe's status describe what mlplat applied last?  KServe does not say
 * which generation of the InferenceService it has seen: status.observedGeneration
 * is copied from the child (the Knative Service in Serverless mode, the
 * Deployment in RawDeployment mode; kserve#6081), whose generation moves with
 * every change KServe propagates into it — the predictor, canary traffic, and
 * the InferenceService's labels, mlplat.io/revision among them.  So a first
 * apply of a revision always moves the child on, and the status is ours once
 * observedGeneration (or, in Serverless mode, the predictor's
 * latestCreatedRevision) differs from what it showed before the apply.  Only
 * the first apply of a revision records it: a later apply of the same
 * revision (sent unobserved by a woken pass, or over drift) may change
 * nothing KServe propagates, and its child would never move.  With nothing
 * recorded (a revision applied before this rule) or a null generation (the
 * rollout that promoted the revision saw KServe serve it, or the revision
 * was there before this pass applied it) the status is taken as it is.
 */
static bool
isvc_status_current(const Deployment *d)
{
	int64 og = -1;
	const char *lcr;

	if (!d->seen_known || d->seen_rev != d->desired_revision)
		return true;
	if (!mlplat_json_int(d->obj, "status", "observedGeneration", &og))
		return false; /* KServe has written no status yet */
	if (og != d->seen_og)
		return true;
	lcr = mlplat_json_text(isvc_predictor_status(d->obj), "latestCreatedRevision", NULL, NULL);
	return lcr != NULL && (d->seen_lcr == NULL || strcmp(lcr, d->seen_lcr) != 0);
}

/*
 * KServe's Ready condition, once its status describes what mlplat applied:
 * returns "True", "False" or "Unknown" (also while the status is older), and
 * the False reason/message.  In Serverless mode Ready also needs the revision
 * Knative created last to be the ready one (RawDeployment has no revisions:
 * its Ready follows the Deployment's Available and Progressing conditions).
 */
static const char *
isvc_ready(const Deployment *d, const char **why)
{
	const MlJsonValue *conds = ml_json_object_get(ml_json_object_get(d->obj, "status"), "conditions");
	const MlJsonValue *pred = isvc_predictor_status(d->obj);
	const char *created = mlplat_json_text(pred, "latestCreatedRevision", NULL, NULL);
	const char *ready = mlplat_json_text(pred, "latestReadyRevision", NULL, NULL);

	*why = NULL;
	if (!isvc_status_current(d))
		return "Unknown";
	if (conds == NULL || conds->type != ML_JSON_ARRAY)
		return "Unknown";
	for (size_t i = 0; i < conds->u.array.count; i++)
	{
		const MlJsonValue *c = conds->u.array.items[i];
		const char *type = mlplat_json_text(c, "type", NULL, NULL);
		const char *st = mlplat_json_text(c, "status", NULL, NULL);

		if (type && st && strcmp(type, "Ready") == 0)
		{
			if (strcmp(st, "False") == 0)
			{
				*why = mlplat_json_text(c, "message", NULL, NULL);
				if (*why == NULL)
					*why = mlplat_json_text(c, "reason", NULL, NULL);
				return "False";
			}
			if (strcmp(st, "True") != 0)
				return "Unknown";
			/* a newer revision created but not ready yet: Ready describes the older one */
			return created && ready && strcmp(created, ready) != 0 ? "Unknown" : "True";
		}
	}
	return "Unknown";
}

/*
 * Where KServe's status stood before this pass's first apply of a revision,
 * as JSON for observed.kserve_at_apply: read from the object seen before the
 * apply (listed, or found by the probe), never from the apply's answer.  The
 * answer can already show KServe serving the revision: an earlier apply whose
 * answer was lost (its leader died) may have landed between this pass's look
 * and its apply, and KServe reacted; this apply then changes nothing, the
 * child never moves again, and a fingerprint taken from the answer would wait
 * for it forever.  For the same reason an object that already carries the
 * revision records null (its status is taken as it is), and so does no object
 * at all (a create: whatever status appears is about it).
 */
static char *
isvc_fingerprint(const MlJsonValue *before, int revision)
{
	const char *rev_label = before ? mlplat_json_text(before, "metadata", "labels", "mlplat.io/revision") : NULL;
	const char *lcr = NULL;
	int64 og;
	bool have_og = false;
	StringInfoData s;

	if (before && (rev_label == NULL || atoi(rev_label) != revision))
	{
		have_og = mlplat_json_int(before, "status", "observedGeneration", &og);
		lcr = mlplat_json_text(isvc_predictor_status(before), "latestCreatedRevision", NULL, NULL);
	}
	initStringInfo(&s);
	appendStringInfo(&s, "{\"revision\": %d, \"observedGeneration\": ", revision);
	if (have_og)
		appendStringInfo(&s, INT64_FORMAT, og);
	else
		appendStringInfoString(&s, "null");
	appendStringInfoString(&s, ", \"latestCreatedRevision\": ");
	mlplat_json_append_text(&s, lcr);
	appendStringInfoChar(&s, '}');
	return text_kept(&s);
}

/* Every drifted path as a JSON array, kept in observed.drift_paths for people to read. */
static char *
drift_paths_json(const MlSpecDiff *diff)
{
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfoChar(&s, '[');
	for (size_t i = 0; i < diff->count; i++)
	{
		if (i)
			appendStringInfoString(&s, ", ");
		escape_json(&s, diff->entries[i].path);
	}
	appendStringInfoChar(&s, ']');
	return text_kept(&s);
}

static char *
deadline_reason(const Deployment *d)
{
	const char *whose = d->deadline_own ? "set_deploy_deadline" : "mlplat.deploy_deadline";

	return d->deadline_ms % 1000 == 0
			   ? psprintf("revision %d was not READY within the deploy deadline of %lld s (%s)",
						  d->desired_revision, (long long) (d->deadline_ms / 1000), whose)
			   : psprintf("revision %d was not READY within the deploy deadline of %lld ms (%s)",
						  d->desired_revision, (long long) d->deadline_ms, whose);
}

/*
 * The status KServe's readiness gives the desired revision, once it is applied
 * and matches: READY, FAILED (Ready=False, or still not ready past the deploy
 * deadline), or still waiting.
 */
static void
deployment_readiness(Deployment *d)
{
	const char *why;
	const char *ready = isvc_ready(d, &why);

	d->mark_observed = true;
	if (strcmp(ready, "True") == 0)
	{
		const char *url = mlplat_json_text(d->obj, "status", "url", NULL);

		d->new_status = MLPLAT_DEPLOYMENT_READY;
		d->endpoint = url ? pstrdup(url) : NULL;
		d->reason = psprintf("revision %d ready", d->desired_revision);
	}
	else if (strcmp(ready, "False") == 0)
	{
		d->new_status = MLPLAT_DEPLOYMENT_FAILED;
		d->reason = psprintf("KServe reports not ready: %s", why ? why : "no reason given");
	}
	else if (d->deadline_passed)
	{
		d->new_status = MLPLAT_DEPLOYMENT_FAILED;
		d->reason = deadline_reason(d);
	}
	else
	{
		d->new_status = d->status == MLPLAT_DEPLOYMENT_DRIFTED ? MLPLAT_DEPLOYMENT_DRIFTED : MLPLAT_DEPLOYMENT_DEPLOYING;
		d->reason = psprintf("waiting for revision %d to become ready", d->desired_revision);
	}
}

/* Why the desired revision is not applied yet: the object under its name is terminating. */
static char *
terminating_wait_reason(const Deployment *d, const char *fins)
{
	return psprintf("waiting for the terminating InferenceService %s/%s to go%s%s%s before applying revision %d", d->namespace,
					d->name, fins[0] ? " (finalizer " : "", fins, fins[0] ? ")" : "", d->desired_revision);
}

/*
 * Decide what one deployment needs, from desired and observed alone.  Sets
 * action and, when no external write is needed, the status to record.
 */
static void
deployment_decide(Deployment *d, MlJsonArena *arena)
{
	const char *rev_label;
	MlJsonValue *desired;
	MlJsonError err;
	MlSpecDiff diff;
	const char *since;
	char *fins;
	char *tjson;

	d->new_status = d->status;
	d->reason = NULL;
	d->retry_ms = -1;

	if (d->obj && mlplat_object_terminating(d->obj, &since, &fins, &tjson))
	{
		/*
		 * Deleted, held by finalizers: a DELETE again changes nothing, and an
		 * apply would write into an object about to go (and never re-create
		 * it).  Wait for it to go, naming what holds it.
		 */
		if (d->status == MLPLAT_DEPLOYMENT_DELETING)
			d->reason = fins[0] ? psprintf("waiting for finalizer %s to release InferenceService %s/%s (terminating since %s)",
										   fins, d->namespace, d->name, since)
								: psprintf("waiting for InferenceService %s/%s to go (terminating since %s)", d->namespace, d->name,
										   since);
		else
		{
			d->new_status = MLPLAT_DEPLOYMENT_DEPLOYING;
			d->reason = terminating_wait_reason(d, fins);
		}
		if (d->new_status != d->status || d->status_reason == NULL || strcmp(d->status_reason, d->reason) != 0)
			d->write = true;
		return;
	}
	if (d->status == MLPLAT_DEPLOYMENT_DELETING)
	{
		if (d->obj == NULL)
		{
			if (d->unanswered && !mlplat_unanswered_settled(d->unanswered))
			{
				/* an apply sent without a recorded answer may still make it: not gone yet */
				d->reason = psprintf("waiting up to %d s for an unanswered apply of %s/%s to land before calling it gone",
									 mlplat_unanswered_write_grace_ms / 1000, d->namespace, d->name);
				if (d->status_reason == NULL || strcmp(d->status_reason, d->reason) != 0)
					d->write = true;
				return; /* DELETING: the pass looks again soon */
			}
			d->new_status = MLPLAT_DEPLOYMENT_DELETED;
			d->reason = pstrdup("the InferenceService is gone");
			d->mark_observed = true;
			d->settle_note = d->unanswered != NULL;
		}
		else if (d->due)
		{
			/*
			 * An object while an apply's answer is unrecorded: record it (ADOPT) with
			 * the delete.  The note stays until the grace is over: that apply may
			 * still be in flight and land after this delete (it is then found,
			 * recorded and deleted again, and DELETED waits for it).
			 */
			d->adopt = d->unanswered != NULL;
			d->action = DEP_DELETE;
		}
		return;
	}
	if (d->desired_revision <= 0 || d->spec == NULL)
		return;

	rev_label = d->obj ? mlplat_json_text(d->obj, "metadata", "labels", "mlplat.io/revision") : NULL;
	if (d->obj == NULL || rev_label == NULL || atoi(rev_label) != d->desired_revision)
	{
		/* not there, or running another revision: apply the desired one (its text: no parse) */
		if (d->due)
			d->action = DEP_APPLY;
		d->first_apply = true;
		return;
	}

	/* parsed only to compare: an apply sends the stored text */
	desired = d->desired ? (MlJsonValue *) d->desired : ml_json_parse(arena, d->spec, strlen(d->spec), NULL, &err);
	if (desired == NULL)
		elog(ERROR, "stored spec of deployment %lld is not JSON: %s", (long long) d->id, err.message);

	if (!ml_spec_diff(arena, desired, d->obj, &diff, &err))
		elog(ERROR, "spec_diff failed: %s", err.message);
	d->drift_paths = drift_paths_json(&diff);
	if (diff.count > 0)
	{
		d->drift = psprintf("drift at %s", mlplat_drift_paths_line(&diff));
		if (d->drift_report)
		{
			/*
			 * Observe only: say where it differs and never re-apply.  A serving
			 * endpoint stays DRIFTED (and routed) while KServe settles the
			 * edited object; one that never served waits, or fails, as usual.
			 */
			bool was_serving = d->status == MLPLAT_DEPLOYMENT_READY || d->status == MLPLAT_DEPLOYMENT_DRIFTED;

			deployment_readiness(d);
			if (d->new_status == MLPLAT_DEPLOYMENT_READY ||
				(d->new_status != MLPLAT_DEPLOYMENT_FAILED && was_serving))
			{
				d->new_status = MLPLAT_DEPLOYMENT_DRIFTED;
				d->reason = psprintf("%s; not repaired (drift policy report)", d->drift);
			}
			return;
		}
		if (d->status == MLPLAT_DEPLOYMENT_READY)
		{
			/* first sight of drift: say so; the repair follows on the next pass */
			d->new_status = MLPLAT_DEPLOYMENT_DRIFTED;
			d->reason = d->drift;
		}
		else if (d->due)
			d->action = d->status == MLPLAT_DEPLOYMENT_DRIFTED ? DEP_REPAIR : DEP_APPLY;
		return;
	}

	/*
	 * The desired revision is there, but no pass has recorded applying it for
	 * this generation: an apply landed whose answer never came back (the
	 * connection dropped, or the leader died before its write-back).  Say so
	 * in the ledger, or the one write that made the object leaves no trace.
	 */
	if (d->observed_generation != d->generation)
	{
		d->ledger_action = "ADOPT";
		d->ledger_outcome = "OK";
		d->drift = psprintf("found revision %d applied without a recorded answer", d->desired_revision);
	}
	d->settle_note = d->unanswered != NULL;
	deployment_readiness(d);
}

/*
 * An InferenceService under the deployment's name that is not its own (issue
 * 18, finding 5): report it (status reason, last_error, ledger ADOPT CONFLICT)
 * and touch nothing.  A DELETING deployment has nothing left to delete of its
 * own: it is DELETED, the object left alone.  Otherwise it waits, and looks
 * again after MLPLAT_PERMANENT_RETRY_MS (one ledger row per look).
 */
static void
deployment_not_ours(Deployment *d)
{
	char *what = psprintf("InferenceService %s/%s exists but is not this deployment's: %s", d->namespace, d->name,
						  d->not_ours);

	d->action = DEP_NONE;
	d->new_status = d->status;
	d->retry_ms = -1;
	if (d->status == MLPLAT_DEPLOYMENT_DELETING)
	{
		if (d->unanswered && !mlplat_unanswered_settled(d->unanswered))
			return; /* an apply of ours may still land: look again */
		d->new_status = MLPLAT_DEPLOYMENT_DELETED;
		d->reason = psprintf("%s; not deleted", what);
		d->mark_observed = true;
		d->settle_note = d->unanswered != NULL;
	}
	else
	{
		if (!d->due)
			return;
		/* not serving: the object under its name is someone else's */
		if (d->status == MLPLAT_DEPLOYMENT_READY || d->status == MLPLAT_DEPLOYMENT_DRIFTED)
			d->new_status = MLPLAT_DEPLOYMENT_DEPLOYING;
		d->reason = psprintf("%s; not adopted, not touched", what);
		d->error = d->reason;
		d->retry_ms = mlplat_retry_ms(true, d->attempts, d->id, 0);
	}
	d->write = true;
	d->ledger_action = "ADOPT";
	d->ledger_outcome = "CONFLICT";
}

/*
 * Judge the objects found under the names of deps (d->obj, or what the look
 * before a first apply found when probe is set: its GET's answer, or the
 * namespace LIST's d->probe_obj): mlplat's labels and a content id of one of
 * the deployment's revisions, or d->not_ours says why not.
 */
static void
judge_found(List *deps, const char *instance, MlJsonArena *arena, bool probe)
{
	List *owners = NIL;
	ListCell *lc;

	foreach (lc, deps)
	{
		Deployment *d = lfirst(lc);
		const MlJsonValue *obj = probe ? d->probe_obj : d->obj;
		MlplatIsvcOwner *o;
		MlJsonError err;

		if (probe && d->probe.get)
		{
			mlplat_observe_got(&d->probe, arena);
			obj = d->probe_obj = d->probe.obj;
			if (d->probe.state == MLPLAT_OBSERVED_ERROR)
			{
				d->probe_failed = true;
				d->error = psprintf("cannot read InferenceService %s/%s before applying: %s", d->namespace, d->name,
									d->probe.error);
				d->ledger_error = d->probe.res.tenant_message ? d->probe.res.message : NULL;
				d->retry_ms = mlplat_retry_ms(false, d->attempts, d->id, d->probe.retry_after_s);
			}
		}
		if (obj == NULL)
			continue;
		o = palloc0(sizeof(MlplatIsvcOwner));
		o->ns = d->namespace;
		o->name = d->name;
		o->obj = obj;
		o->own_content_id = NULL;
		o->no_render = d->spec == NULL;
		o->row = d;
		if (d->spec)
		{
			/* parsed once: deployment_decide reads the same tree */
			if (d->desired == NULL)
				d->desired = ml_json_parse(arena, d->spec, strlen(d->spec), NULL, &err);
			o->own_content_id = d->desired ? mlplat_object_content_id(d->desired) : NULL;
		}
		owners = lappend(owners, o);
	}
	mlplat_isvc_judge(owners, instance);
	foreach (lc, owners)
	{
		MlplatIsvcOwner *o = lfirst(lc);

		((Deployment *) o->row)->not_ours = o->not_ours;
	}
}

/* ---------------------------------------------------------------- I/O */

/* What the fleet's LIST keeps of each InferenceService (an MlplatListKeep) */
static MlJsonValue *
isvc_kept(void *arg, MlJsonArena *arena, const MlJsonValue *obj)
{
	(void) arg;
	return isvc_compared(arena, obj);
}

/*
 * What the namespace's LIST before first applies keeps (an MlplatListKeep;
 * arg: by_name): the objects under a name looked at, nothing of the others.
 * The LIST shows every InferenceService of the namespace (14,000 at page 28
 * of a converge of 30,000); the pass needs the few under its new names.
 */
static MlJsonValue *
isvc_looked_at(void *arg, MlJsonArena *arena, const MlJsonValue *obj)
{
	const char *ns = mlplat_json_text(obj, "metadata", "namespace", NULL);
	const char *name = mlplat_json_text(obj, "metadata", "name", NULL);
	char key[NAMEDATALEN * 2];
	DepByName *e;

	if (ns == NULL || name == NULL || strlen(ns) + strlen(name) + 2 > sizeof(key))
		return NULL;
	snprintf(key, sizeof(key), "%s/%s", ns, name);
	e = hash_search((HTAB *) arg, key, HASH_FIND, NULL);
	return e && e->d->look ? isvc_compared(arena, obj) : NULL;
}

/*
 * Look under the names of first applies that saw nothing of theirs (d->look)
 * before applying over them: an object without mlplat's labels is in no LIST
 * by our selector (issue 18, finding 5).  A namespace with several such names
 * is read with one LIST of its InferenceServices — no label selector, since a
 * look-alike may carry none; paged, and bounded by mlplat.list_max_pages and
 * mlplat.pass_memory_limit as every LIST, keeping only the objects under the
 * names looked at, pruned as the watch cache prunes them — instead of a GET per name (a
 * thousand new deployments of a project were a thousand GETs); what it shows
 * under a name is d->probe_obj, nothing there is nothing found.  A single
 * name, or the names of a namespace whose LIST failed, get their GET in
 * batch, answered with the pass's other requests.  The full pass's LIST cannot
 * stand in for this one: it carries our selector.
 *
 * With the watch cache current (cached), what carries our selector is known
 * already: d->look means the cache has nothing of ours under the name.  Only
 * the rest of the namespace is listed then, by the two selectors whose union
 * is "not ours by label" (k!=v also matches objects without k): managed-by
 * other than mlplat, or an instance other than ours.  A project's namespace
 * holds mostly our objects, so these LISTs stay a page or two however many
 * deployments it has; listing all of it made the look of a sweep's k-th chunk
 * 2k pages, 90 pages over the 10 chunks of 10,000 new deployments (3.5 s of a
 * 30 s converge) and ≈ 10,000 pages at 100,000.  An object of ours that the
 * cache has not shown yet is applied over, as one landing just after a LIST
 * would be: the apply makes it ours in both cases.  No transaction may be open.
 */
static void
look_before_apply(List *deps, HTAB *by_name, MlplatHttpBatch *batch, int *lists, bool cached,
				  const char *instance)
{
	List *nss = NIL;
	ListCell *lc;

	foreach (lc, deps)
	{
		Deployment *d = lfirst(lc);

		if (d->look && !list_member(nss, makeString(d->namespace)))
			nss = lappend(nss, makeString(d->namespace));
	}
	foreach (lc, nss)
	{
		const char *ns = strVal(lfirst(lc));
		List *items = NIL;
		ListCell *li;
		int names = 0;
		bool listed = false;

		foreach (li, deps)
		{
			Deployment *d = lfirst(li);

			names += d->look && strcmp(d->namespace, ns) == 0;
		}
		if (names > 1)
		{
			char *why;

			if (cached)
			{
				why = mlplat_kube_list_kept(&ISVC, ns, MLPLAT_LABEL_MANAGED_BY "!=" MLPLAT_MANAGED_BY, isvc_looked_at,
											by_name, &items, lists);
				if (why == NULL)
					why = mlplat_kube_list_kept(&ISVC, ns, psprintf(MLPLAT_LABEL_INSTANCE "!=%s", instance),
												isvc_looked_at, by_name, &items, lists);
			}
			else
				why = mlplat_kube_list_kept(&ISVC, ns, NULL, isvc_looked_at, by_name, &items, lists);
			if (why)
				ereport(LOG, (errmsg("mlplat: deployments: %s; a GET for each of %d names instead", why, names)));
			listed = why == NULL;
		}
		foreach (li, items)
		{
			const MlJsonValue *obj = lfirst(li);
			const char *name = mlplat_json_text(obj, "metadata", "name", NULL);
			char key[NAMEDATALEN * 2];
			DepByName *e;

			if (name == NULL || strlen(ns) + strlen(name) + 2 > sizeof(key))
				continue;
			snprintf(key, sizeof(key), "%s/%s", ns, name);
			e = hash_search(by_name, key, HASH_FIND, NULL);
			if (e && e->d->look)
				e->d->probe_obj = obj;
		}
		foreach (li, deps)
		{
			Deployment *d = lfirst(li);

			if (d->look && !listed && strcmp(d->namespace, ns) == 0)
				mlplat_observe_get(&d->probe, batch, &ISVC, d->namespace, d->name);
		}
	}
}

/* The rows of this pass: at most mlplat.pass_row_limit (*more: there may be more). */
static void
claim(MlplatPassWork *w, bool full, int64 after, List **out, bool *more)
{
	MlplatPass *pass = w->pass;
	Datum args[5] = { BoolGetDatum(full), BoolGetDatum(pass->woken), Int32GetDatum(mlplat_deploy_deadline_ms),
					  Int64GetDatum(after), Int32GetDatum(mlplat_pass_row_limit) };
	Oid argtypes[5] = { BOOLOID, BOOLOID, INT4OID, INT8OID, INT4OID };
	MlplatClaim c;
	ListCell *lc;

	mlplat_seam_claim_pass(pass, &claim_seam, "SELECT c FROM mlplat._deployments_claim($1, $2, $3, $4, $5) c", 5,
						   argtypes, args, sizeof(Deployment), true, mlplat_pass_row_limit, &c);
	*more = c.full;
	foreach (lc, c.rows)
	{
		Deployment *d = lfirst(lc);

		d->drift_report = d->drift_policy && strcmp(d->drift_policy, "report") == 0;
		if (c.notes != NIL) /* the usual case has none: no name built per row */
		{
			char *object = mlplat_object_path(d->namespace, d->name);

			d->unanswered = mlplat_unanswered_find(c.notes, d->id, object, "APPLY");
			if (d->unanswered == NULL)
				d->unanswered = mlplat_unanswered_find(c.notes, d->id, object, "REPAIR");
		}
		d->claim_start = c.start;
		d->claim_end = c.end;
	}
	*out = c.rows;
	mlplat_pass_work_claimed(w, c.instance, NULL);
}

/*
 * A span of this pass for d (see span.h), NULL when d has no trace.  Spans of
 * a deployment whose write-back commits are written with it; the first request
 * to an outside system (kind CLIENT: apply, delete, artifact check) also
 * records the claim that led to it.  End it with mlplat_span_end().
 */
static MlplatSpan *
dep_span(Deployment *d, const char *step, MlplatSpanKind kind)
{
	MlplatSpan *s = mlplat_span_begin(d->traceparent, psprintf("deployments.%s", step), kind);

	if (s == NULL)
		return NULL;
	mlplat_span_set_entity(s, d->project, "deployment", d->id);
	mlplat_span_attr_text(s, "k8s.namespace.name", d->namespace);
	mlplat_span_attr_text(s, "mlplat.deployment", d->name);
	if (d->desired_revision > 0)
		mlplat_span_attr_int(s, "mlplat.revision", d->desired_revision);
	if (kind == MLPLAT_SPAN_CLIENT && !d->claim_traced)
	{
		MlplatSpan *c = mlplat_span_begin_at(d->traceparent, "deployments.claim", MLPLAT_SPAN_INTERNAL,
											 d->claim_start);

		mlplat_span_set_entity(c, d->project, "deployment", d->id);
		mlplat_span_end_at(c, d->claim_end, NULL);
		d->spans = lappend(d->spans, c);
		d->claim_traced = true;
	}
	d->spans = lappend(d->spans, s);
	return s;
}

static void
apply_result(Deployment *d, MlplatPass *pass)
{
	MlplatKubeResult res;

	/* the outcome is all we read: no jsonb copy of the answer */
	mlplat_kube_write_result(d->req, d->action == DEP_DELETE, &res);
	d->http_status = res.status;
	d->write = true;
	if (mlplat_write_answered(res.status))
		d->answered = true;
	/* a delete found what an apply never answered had made */
	if (d->action == DEP_DELETE && d->unanswered && !d->adopt && res.outcome == MLPLAT_KUBE_OK && res.status != 404)
		d->adopt = true;
	mlplat_span_end_request(d->req_span, d->req, res.status,
							res.outcome == MLPLAT_KUBE_OK
								? NULL
								: (mlplat_kube_tenant_line(&res) ? mlplat_kube_tenant_line(&res) : "request failed"));
	switch (res.outcome)
	{
		case MLPLAT_KUBE_OK:
			d->ledger_outcome = "OK";
			if (d->action == DEP_DELETE)
			{
				d->reason = pstrdup("delete requested; waiting for the InferenceService to go");
				break;
			}
			d->new_status = d->action == DEP_REPAIR ? MLPLAT_DEPLOYMENT_DRIFTED : MLPLAT_DEPLOYMENT_DEPLOYING;
			d->reason = d->action == DEP_REPAIR
							? psprintf("repair applied revision %d again over %s", d->desired_revision,
									   d->drift ? d->drift : "drift")
							: psprintf("applied revision %d; waiting for readiness", d->desired_revision);
			d->mark_observed = true;
			/* the next pass reads what was applied, whether or not the watch has sent it yet */
			if (isvc_cache && mlplat_deployments_watch)
				mlplat_watch_cache_wrote(isvc_cache, d->req->resp_body, d->req->resp_len);
			/* a new revision label moves KServe's child on: remember where it stood */
			if (d->action == DEP_APPLY && d->seen_rev != d->desired_revision)
				d->seen_json = isvc_fingerprint(d->obj ? d->obj : d->probe_obj, d->desired_revision);
			break;
		case MLPLAT_KUBE_NOT_FOUND:
		case MLPLAT_KUBE_RETRY:
		case MLPLAT_KUBE_CONFLICT:
		case MLPLAT_KUBE_EXISTS:
		case MLPLAT_KUBE_EXPIRED:
		case MLPLAT_KUBE_FAILED:
			mlplat_write_failed(&res, d->attempts, d->id, &d->ledger_outcome, &d->error, &d->ledger_error,
								&d->retry_ms);
			/*
			 * A refusal (403: a verb taken from mlplat's ClusterRole; 422) is
			 * not transient: the status stays, and its reason says what was
			 * refused, so the tenant need not read last_error to know
			 */
			if (res.outcome == MLPLAT_KUBE_FAILED)
				d->reason = psprintf("the %s of InferenceService %s/%s was refused (HTTP %d): %s; retrying slowly",
									 d->action == DEP_DELETE ? "delete" : "apply", d->namespace, d->name, res.status,
									 d->error ? d->error : "no reason given");
			break;
	}
	/* an intent whose applies keep failing also runs out of time */
	if (d->error && d->deadline_passed && d->action == DEP_APPLY)
	{
		d->new_status = MLPLAT_DEPLOYMENT_FAILED;
		d->reason = psprintf("%s; the last apply failed: %s", deadline_reason(d), d->error);
	}
	if (d->retry_ms < 0)
		pass->next_pass_ms = FOLLOW_UP_MS;
}

/*
 * The rows of deps compared with the cluster and left unwritten: their next
 * resync moves on (_deployments_resynced), in one statement.  A row whose
 * write-back lost its compare-and-swap is not among them: it stays due and is
 * read again next pass.
 */
static void
mark_resynced(MlplatPass *pass, List *deps)
{
	Datum *ids = palloc(sizeof(Datum) * Max(1, list_length(deps)));
	int n = 0;
	ListCell *lc;

	foreach (lc, deps)
	{
		Deployment *d = lfirst(lc);

		if (!d->write)
			ids[n++] = Int64GetDatum(d->id);
	}
	if (n == 0)
		return;
	(void) mlplat_sql_exec("SELECT mlplat._deployments_resynced($1, $2)", 2, (Oid[]){ INT8OID, INT8ARRAYOID },
						   (Datum[]){ Int64GetDatum(pass->epoch),
									  PointerGetDatum(construct_array(ids, n, INT8OID, sizeof(int64), FLOAT8PASSBYVAL,
																	  TYPALIGN_DOUBLE)) },
						   NULL);
}

/* the write-back row of d (and the notes it settles, an adoption's ledger row) */
static bool
dep_row(MlplatWriteback *wb, void *entity, void *row)
{
	Deployment *d = entity;
	DeploymentWriteback *w = row;

	if (d->settle_note)
		mlplat_write_notes_add(&wb->settled, d->id, mlplat_object_path(d->namespace, d->name), NULL);
	else if (d->answered && d->ledger_action)
		mlplat_write_notes_answered(&wb->settled, d->id, mlplat_object_path(d->namespace, d->name), d->ledger_action,
									d->action != DEP_DELETE && mlplat_write_made(d->http_status));
	if (d->adopt)
		mlplat_ledger_batch_add(wb->ledger, "deployment", d->id, d->project, "ADOPT", "OK", d->spec_digest, NULL, 0,
								NULL, mlplat_trace_id_of(d->traceparent),
								psprintf("found %s/%s made by an apply whose answer was never recorded", d->namespace,
										 d->name));
	if (!d->write)
		return false;
	w->status = d->new_status;
	w->reason = d->reason;
	w->observed_generation = d->mark_observed ? d->generation : -1;
	w->observed_revision = d->mark_observed && d->desired_revision > 0 ? d->desired_revision : -1;
	w->endpoint = d->endpoint;
	w->observed = psprintf("{\"drift_paths\": %s%s%s%s%s%s%s}", d->drift_paths ? d->drift_paths : "[]",
						   d->seen_json ? ", \"kserve_at_apply\": " : "", d->seen_json ? d->seen_json : "",
						   d->terminating_json ? ", \"terminating\": " : "",
						   d->terminating_json ? d->terminating_json : "",
						   d->mode_json ? ", \"deployment_mode\": " : "", d->mode_json ? d->mode_json : "");
	w->error = d->error;
	w->retry_ms = d->retry_ms;
	wb->row_spans = d->spans;
	return true;
}

/* after the write-back: d's ledger row */
static void
dep_done(MlplatWriteback *wb, void *entity, bool held)
{
	Deployment *d = entity;

	/*
	 * An external write happened whether or not the row moved meanwhile:
	 * record it even when the compare-and-swap lost (a deposed leader's
	 * row is refused by the epoch check inside).  An adoption is only an
	 * observation: recorded with the write-back, or found again next pass.
	 */
	if (d->ledger_action && (held || d->req))
		mlplat_ledger_batch_add(wb->ledger, "deployment", d->id, d->project, d->ledger_action, d->ledger_outcome,
								d->ledger_desired ? d->ledger_desired : d->spec_digest, d->ledger_observed,
								d->http_status, d->ledger_error ? d->ledger_error : d->error,
								mlplat_trace_id_of(d->traceparent), d->ledger_note ? d->ledger_note : d->drift);
}

/*
 * Write back every deployment of deps that has something to record, in one
 * statement (compare-and-swap per row), then the ledger rows and spans, each
 * in one statement too: the cost of a write-back is a few statements per
 * pass, not a few per deployment.  observed: this pass compared deps with the
 * cluster, so those it had nothing to write for are marked resynced (their
 * next resync moves on; a written row's moves with its write-back).
 */
static void
write_back(MlplatPass *pass, List *deps, List *orphans, bool observed)
{
	MlplatWriteback wb;
	ListCell *lc;

	mlplat_writeback_begin(&wb, pass, &writeback_seam, &claim_seam);
	mlplat_writeback_rows(&wb, deps, dep_row, "SELECT * FROM mlplat._deployments_writeback_set($1, $2)", dep_done);
	foreach (lc, orphans)
	{
		Deployment *o = lfirst(lc);

		mlplat_writeback_orphan(&wb, "deployment", 0, o->project, o->ledger_outcome, o->http_status, o->error,
								mlplat_object_path(o->namespace, o->name));
	}
	if (observed)
		mark_resynced(pass, deps);
	mlplat_writeback_end(&wb);
}

/*
 * The write-ahead of a batch: note every apply and delete about to be sent (committed,
 * fenced on the epoch).  False when this replica is no longer the leader: send nothing.
 */
static bool
note_requests(MlplatPassWork *w, List *deps)
{
	ListCell *lc;

	/* this batch's notes only: those of the pass's first batch are committed already */
	memset(&w->sending, 0, sizeof(w->sending));
	foreach (lc, deps)
	{
		Deployment *d = lfirst(lc);

		if (d->req && d->ledger_action)
			mlplat_write_notes_add(&w->sending, d->id, mlplat_object_path(d->namespace, d->name), d->ledger_action);
	}
	return mlplat_pass_work_notes_commit(w, "requests");
}

/*
 * A converge's batch of first applies is up to mlplat.pass_row_limit long: its
 * answered applies are written back in parts of this many rows (one short
 * transaction each, compare-and-swap on the row and the epoch as always) from
 * inside the batch's run, while the requests in flight keep the server busy,
 * instead of all at the end, where the apply window had drained (0.2-0.3 s a
 * chunk of 1,000 at 10,000 deployments, docs/benchmarks.md).
 */
#define APPLIED_PART_ROWS 100

typedef struct AppliedPart
{
	MlplatPass *pass;
	List *deps; /* the batch's rows */
	List *part; /* scratch */
} AppliedPart;

/* mlplat_http_batch_run_each: write back the rows whose apply has answered */
static void
write_back_answered(void *arg)
{
	AppliedPart *a = arg;
	ListCell *lc;

	a->part = NIL;
	foreach (lc, a->deps)
	{
		Deployment *d = lfirst(lc);

		if (d->req && d->req->done && !d->written_back)
		{
			apply_result(d, a->pass);
			d->written_back = true;
			a->part = lappend(a->part, d);
		}
	}
	write_back(a->pass, a->part, NIL, false);
	/* read, given to the watch cache and written back: the chunk's later answers need not wait with them */
	foreach (lc, a->part)
		mlplat_http_request_release(((Deployment *) lfirst(lc))->req);
	list_free(a->part);
}

/*
 * Finish the artifact checks of the first applies this pass held back, apply
 * those whose artifact is verified (one batch, counted in w->creates), record
 * the others, and write them back.
 */
static void
apply_checked(MlplatPassWork *w, List *deps, List *checks)
{
	MlplatPass *pass = w->pass;
	MlplatHttpBatch *batch;
	List *checked = NIL;
	List *rest = NIL;
	ListCell *lc;

	mlplat_artifact_finish(pass, checks);
	/* what the probes found under the names of first applies: applied over only when its own */
	judge_found(deps, w->instance, w->arena, true);

	batch = mlplat_http_batch_create(w->cxt);
	foreach (lc, deps)
	{
		Deployment *d = lfirst(lc);
		MlplatArtifactCheck *c = d->check;
		const char *since;
		char *fins;
		char *tjson;

		if (c == NULL)
			continue;
		checked = lappend(checked, d);
		if (d->check_span)
		{
			if (c->uri)
				mlplat_span_attr_text(d->check_span, "mlplat.artifact.uri", c->uri);
			/*
			 * tenants read their spans (trace_spans): a failed check says no
			 * more there than in status_reason — no store status (404 against
			 * 200 would tell whether the object exists), no digest source
			 */
			if (c->source && c->verdict == MLPLAT_ARTIFACT_OK)
				mlplat_span_attr_text(d->check_span, "mlplat.artifact.digest_source", c->source);
			mlplat_span_end(d->check_span, c->verdict == MLPLAT_ARTIFACT_OK ? NULL : c->reason);
		}
		if (c->verdict == MLPLAT_ARTIFACT_OK && (d->not_ours || d->probe_failed))
		{
			/* verified, but the name is someone else's, or could not be looked at */
			if (d->not_ours)
			{
				d->due = true;
				deployment_not_ours(d);
			}
			else
			{
				d->action = DEP_NONE;
				d->write = true;
				d->reason = d->error;
			}
			continue;
		}
		if (c->verdict == MLPLAT_ARTIFACT_OK && d->probe_obj &&
			mlplat_object_terminating(d->probe_obj, &since, &fins, &tjson))
		{
			/*
			 * A woken pass saw nothing, and the probe found the object under the
			 * name deleted and held by finalizers (a redeploy of a DELETING
			 * deployment, or one deleted out of band): an apply would write into
			 * it and never re-create it.  Wait for it to go, as deployment_decide.
			 */
			d->action = DEP_NONE;
			d->new_status = MLPLAT_DEPLOYMENT_DEPLOYING;
			d->reason = terminating_wait_reason(d, fins);
			d->terminating_json = tjson;
			d->write = true;
			continue;
		}
		if (c->verdict == MLPLAT_ARTIFACT_OK)
		{
			d->req = mlplat_kube_apply(batch, &ISVC, d->namespace, d->name, d->spec);
			d->req_span = dep_span(d, "apply", MLPLAT_SPAN_CLIENT);
			d->ledger_action = "APPLY";
			d->ledger_note = c->detail;
			w->creates++;
			continue;
		}
		d->action = DEP_NONE;
		d->write = true;
		/* the tenant reads the generic reason; the ledger keeps what the store said */
		d->reason = c->reason;
		d->error = c->reason;
		d->ledger_error = c->detail;
		d->retry_ms = c->retry_ms >= 0 ? c->retry_ms : 1000;
		d->http_status = c->http_status;
		d->new_status = c->verdict == MLPLAT_ARTIFACT_FAILED ? MLPLAT_DEPLOYMENT_FAILED : d->status;
		/* a ledger row per finding; not again for each slow retry of the same failure */
		if (c->verdict == MLPLAT_ARTIFACT_RETRY ||
			(c->verdict == MLPLAT_ARTIFACT_FAILED && (d->attempts == 0 || d->status != MLPLAT_DEPLOYMENT_FAILED)))
		{
			d->ledger_action = "VERIFY";
			d->ledger_outcome = c->verdict == MLPLAT_ARTIFACT_FAILED ? "FAILED" : "RETRY";
			d->ledger_desired = c->want_sha256;
			d->ledger_observed = c->got_sha256;
			d->ledger_note = c->uri;
		}
	}
	if (!note_requests(w, checked))
		return;
	{
		AppliedPart part = { pass, checked, NIL };

		/* the applies answered are written back in parts while the rest are in flight */
		mlplat_http_batch_run_each(batch, APPLIED_PART_ROWS, write_back_answered, &part);
	}
	foreach (lc, checked)
	{
		Deployment *d = lfirst(lc);

		if (d->req && !d->written_back)
			apply_result(d, pass);
		if (!d->written_back)
			rest = lappend(rest, d);
	}
	write_back(pass, rest, NIL, false);
}

/* ---------------------------------------------------------------- the watch cache */

/*
 * What the cache keeps of an InferenceService, and what a fleet-wide LIST (the
 * watch-off pass's, the namespace's before first applies) keeps of each page
 * before the next: only what a pass reads of it —
 * apiVersion, kind and spec (the drift comparison), metadata's name,
 * namespace, labels, mlplat's annotations, deletionTimestamp and finalizers
 * (ownership, termination), and status's readiness fields: the Ready
 * condition's type, status, reason and message (isvc_ready; not its times,
 * nor the other conditions) and the predictor's latest created and ready
 * revisions.  Not the resourceVersion (the cache keeps the last one apart),
 * so an event that changed none of these changes nothing.
 */
static MlJsonValue *
isvc_ready_only(MlJsonArena *arena, const MlJsonValue *conds)
{
	static const char *const cond[] = { "type", "status", "reason", "message" };
	MlJsonValue *out;
	size_t n = 0;

	if (conds == NULL || conds->type != ML_JSON_ARRAY)
		return (MlJsonValue *) conds;
	out = ml_json_arena_alloc(arena, sizeof(MlJsonValue));
	out->type = ML_JSON_ARRAY;
	out->u.array.items = ml_json_arena_alloc(arena, sizeof(MlJsonValue *) * Max(conds->u.array.count, 1));
	for (size_t i = 0; i < conds->u.array.count; i++)
	{
		const char *type = mlplat_json_text(conds->u.array.items[i], "type", NULL, NULL);
		MlJsonValue *c;

		if (type == NULL || strcmp(type, "Ready") != 0)
			continue;
		if ((c = mlplat_json_pick(arena, conds->u.array.items[i], cond, lengthof(cond))) == NULL)
			return NULL;
		out->u.array.items[n++] = c;
	}
	out->u.array.count = n;
	return out;
}

static MlJsonValue *
isvc_compared(MlJsonArena *arena, const MlJsonValue *obj)
{
	static const char *const top[] = { "apiVersion", "kind", "metadata", "spec", "status" };
	static const char *const meta[] = { "name", "namespace", "labels", "annotations", "deletionTimestamp", "finalizers" };
	static const char *const status[] = { "observedGeneration", "url", "conditions", "deploymentMode", "components" };
	static const char *const predictor[] = { "predictor" };
	static const char *const revisions[] = { "latestCreatedRevision", "latestReadyRevision" };
	MlJsonValue *kept = mlplat_json_pick(arena, obj, top, lengthof(top));
	const MlJsonValue *ann = ml_json_object_get(ml_json_object_get(obj, "metadata"), "annotations");
	MlJsonMember *m;

	if (kept == NULL)
		return NULL;
	for (size_t i = 0; i < kept->u.object.count; i++)
	{
		m = &kept->u.object.members[i];
		if (strcmp(m->key, "metadata") == 0)
		{
			MlJsonValue *md = mlplat_json_pick(arena, m->value, meta, lengthof(meta));

			/* annotations: mlplat's only (kubectl's last-applied-configuration can be large) */
			for (size_t j = 0; md && ann && ann->type == ML_JSON_OBJECT && j < md->u.object.count; j++)
				if (strcmp(md->u.object.members[j].key, "annotations") == 0)
				{
					const char **keys = ml_json_arena_alloc(arena, sizeof(char *) * Max(ann->u.object.count, 1));
					int n = 0;

					for (size_t k = 0; k < ann->u.object.count; k++)
						if (strncmp(ann->u.object.members[k].key, "mlplat.io/", 10) == 0)
							keys[n++] = ann->u.object.members[k].key;
					md->u.object.members[j].value = mlplat_json_pick(arena, ann, keys, n);
				}
			m->value = md;
		}
		else if (strcmp(m->key, "status") == 0)
		{
			MlJsonValue *st = mlplat_json_pick(arena, m->value, status, lengthof(status));

			for (size_t j = 0; st && j < st->u.object.count; j++)
			{
				MlJsonMember *sm = &st->u.object.members[j];

				MlJsonValue *kept_value = NULL;

				if (strcmp(sm->key, "components") == 0)
				{
					MlJsonValue *revs;

					/* components.predictor: its two revisions only */
					kept_value = mlplat_json_pick(arena, sm->value, predictor, lengthof(predictor));
					if (kept_value && kept_value->u.object.count == 1 &&
						(revs = mlplat_json_pick(arena, kept_value->u.object.members[0].value, revisions,
												 lengthof(revisions))) != NULL)
						kept_value->u.object.members[0].value = revs;
				}
				else if (strcmp(sm->key, "conditions") == 0)
					kept_value = isvc_ready_only(arena, sm->value);
				/* a value of another shape than KServe's is kept as it came */
				if (kept_value)
					sm->value = kept_value;
			}
			m->value = st;
		}
		if (m->value == NULL)
			return NULL;
	}
	return kept;
}

/*
 * A "namespace/name" key (the watch cache's, the claim's by_name) split into
 * a copy in the current context: its namespace, *name its name; NULL when it
 * has no slash.
 */
static char *
key_split(const char *key, const char **name)
{
	char *ns = pstrdup(key);
	char *slash = strchr(ns, '/');

	if (slash == NULL)
		return NULL;
	*slash = '\0';
	*name = slash + 1;
	return ns;
}

/* Make due the live rows of the objects the watch saw change ("namespace/name" keys). */
static void
mark_due(MlplatPass *pass, List *keys)
{
	MemoryContext cxt = CurrentMemoryContext;
	ArrayBuildState *nss;
	ArrayBuildState *names;
	ListCell *lc;

	mlplat_txn_begin(); /* the arrays' element type is looked up in the catalog */
	nss = initArrayResult(TEXTOID, cxt, false);
	names = initArrayResult(TEXTOID, cxt, false);
	foreach (lc, keys)
	{
		const char *name;
		char *ns = key_split(lfirst(lc), &name);

		if (ns == NULL)
			continue;
		mlplat_array_add_text(nss, ns);
		mlplat_array_add_text(names, name);
	}
	(void) mlplat_sql_exec("SELECT mlplat._deployments_due($1, $2, $3)", 3, (Oid[]){ INT8OID, TEXTARRAYOID, TEXTARRAYOID },
						   (Datum[]){ Int64GetDatum(pass->epoch), makeArrayResult(nss, cxt),
									  makeArrayResult(names, cxt) },
						   NULL);
	mlplat_txn_commit();
}

/*
 * An idle leader (mlplat.workers_enabled off, or fenced) closes its watch and
 * forgets the cache.  Kept open, the stream went unread and its version
 * stale: a pause longer than the API server's event history resumed with a
 * 410 Gone and a relist anyway (bench/converge pauses the workers between
 * its sizes), and the server kept a stream for a leader that acts on
 * nothing.  The next pass lists, as a new leadership's first does.
 */
void
mlplat_deployments_idle(void)
{
	if (isvc_cache && watch_epoch != -1)
		mlplat_watch_cache_reset(isvc_cache);
	watch_epoch = -1;
}

/*
 * Bring the watch cache up to date (mlplat.deployments_watch) and make the
 * rows of what changed due.  True when this pass may observe from the cache;
 * *filled when the cache was filled just now (nothing is "changed" then: the
 * pass should compare every row).  Sets the row resync period in force: long
 * while the cache is current, mlplat.resync_interval otherwise.  No
 * transaction may be open.
 */
static bool
watch_sync(MlplatPass *pass, const char *instance, bool *filled, char *note, size_t note_len)
{
	MlplatWatchSync ws;
	char *why;
	long objects;
	Size bytes;
	bool ok;

	*filled = false;
	note[0] = '\0';
	if (!mlplat_deployments_watch)
	{
		if (isvc_cache)
			mlplat_watch_cache_reset(isvc_cache);
		watch_epoch = -1;
		SetConfigOption("mlplat.row_resync_interval", "0", PGC_SUSET, PGC_S_SESSION);
		return false;
	}
	if (isvc_cache == NULL)
		isvc_cache = mlplat_watch_cache_create(&ISVC, isvc_compared);
	if (watch_epoch != pass->epoch)
	{
		/* a new leadership starts from a LIST */
		mlplat_watch_cache_reset(isvc_cache);
		watch_epoch = pass->epoch;
	}
	why = mlplat_watch_cache_sync(isvc_cache, mlplat_managed_selector(instance), &ws);
	ok = why == NULL;
	if (ok && ws.changed != NIL)
	{
		mark_due(pass, ws.changed);
		watch_changed = list_concat(watch_changed, ws.changed);
	}
	*filled = ws.filled;
	mlplat_watch_cache_size(isvc_cache, &objects, &bytes);
	if (ok)
		snprintf(note, note_len, "; watch: %ld cached, %zu kB%s", objects, bytes / 1024,
				 ws.relists ? ", listed" : "");
	else
	{
		ereport(LOG, (errmsg("mlplat: deployments: the watch cache cannot be used: %s", why)));
		snprintf(note, note_len, "; watch unhealthy");
		/*
		 * A failed watch is tried again when its backoff ends: a pass then.
		 * Left to the next resync or commit, it stayed down (113 s in
		 * watch_wake.sh with nothing due; up to mlplat.resync_interval).
		 */
		if (ws.retry_ms > 0 && (pass->next_pass_ms <= 0 || ws.retry_ms < pass->next_pass_ms))
			pass->next_pass_ms = ws.retry_ms;
	}
	SetConfigOption("mlplat.row_resync_interval",
					ok ? psprintf("%d", mlplat_watch_resync_interval_ms) : "0", PGC_SUSET, PGC_S_SESSION);
	return ok;
}

/* The object of namespace/name in a LIST's items, or NULL. */
static const MlJsonValue *
find_listed(List *items, const char *ns, const char *name)
{
	ListCell *lc;

	foreach (lc, items)
	{
		const MlJsonValue *obj = lfirst(lc);

		if (mlplat_str_same(mlplat_json_text(obj, "metadata", "namespace", NULL), ns) &&
			mlplat_str_same(mlplat_json_text(obj, "metadata", "name", NULL), name))
			return obj;
	}
	return NULL;
}

/*
 * Of keys ("namespace/name"), those no live deployment owns, as the database
 * says (_deployments_unowned): a pass claims a chunk of the rows, so not being
 * among them says nothing.  No transaction may be open.
 */
static List *
unowned(List *keys)
{
	int n = list_length(keys);
	const char **cells = palloc(sizeof(char *) * 2 * Max(n, 1));
	bool *orphaned;
	List *out = NIL;
	int i = 0;
	ListCell *lc;

	foreach (lc, keys)
	{
		const char *name = "";
		char *ns = key_split(lfirst(lc), &name);

		cells[2 * i] = ns ? ns : lfirst(lc);
		cells[2 * i + 1] = name;
		i++;
	}
	orphaned = mlplat_sql_known_ordinals("SELECT i FROM mlplat._deployments_unowned($1, $2) i", 2, n, cells);
	i = 0;
	foreach (lc, keys)
		if (orphaned[i++])
			out = lappend(out, lfirst(lc));
	return out;
}

/*
 * The watch saw an object of ours change (made, say, by an apply whose leader
 * ended, landing after its deployment was deleted) that no claimed row owns
 * (by_name: the claimed rows; NULL: none) and no live row owns either: an
 * orphan, perhaps.  The next pass judges orphans instead of waiting for
 * mlplat.full_resync_interval.
 */
static void
orphans_next_if_unowned(MlplatPass *pass, HTAB *by_name)
{
	List *keys = NIL;
	ListCell *lc;

	foreach (lc, watch_changed)
	{
		const char *name;
		char *ns;

		if (by_name && hash_search(by_name, lfirst(lc), HASH_FIND, NULL) != NULL)
			continue;
		/* asked about each object a previous chunk changed: held, not parsed (15 kB an object) */
		if ((ns = key_split(lfirst(lc), &name)) != NULL && mlplat_watch_cache_has(isvc_cache, ns, name))
			keys = lappend(keys, lfirst(lc));
	}
	if (unowned(keys) != NIL)
	{
		orphans_due = true;
		pass->next_pass_ms = 1;
	}
}

/*
 * mlplat.test_pass_hold, for tests only: each new value holds the next pass
 * that syncs the watch (not a commit's wake) that long, right after the sync,
 * while the HTTP client keeps reading the watch as during a slow batch.  An
 * event read then must end the wait after the pass (test/e2e/watch_wake.sh);
 * the log says whether its wake was pending when the hold ended.
 */
static void
test_pass_hold(void)
{
	static int held = 0;
	bool pending;

	if (mlplat_test_pass_hold_ms == held)
		return;
	held = mlplat_test_pass_hold_ms;
	if (held == 0)
		return;
	pgstat_report_activity(STATE_RUNNING, "mlplat test pass hold");
	pending = mlplat_http_drive(held);
	pgstat_report_activity(STATE_RUNNING, "reconcile pass");
	ereport(LOG, (errmsg("mlplat: deployments: test pass hold of %d ms ended, a wake %s", held,
						 pending ? "pending" : "not pending")));
}

void
mlplat_deployments_pass(MlplatPass *pass)
{
	MlplatPassWork w;
	MlJsonArena *arena;
	char *why = NULL;
	List *deps = NIL;
	List *items;
	ListCell *lc;
	HTAB *by_name;
	int gets = 0;
	List *checks = NIL;
	bool full;
	bool more = false;
	bool judge_orphans;
	List *candidates = NIL;
	bool cached = false;
	bool observed;
	bool filled = false;
	int64 chunk_after;
	char note[48] = "";

	watch_changed = NIL;
	mlplat_pass_work_begin(&w, pass);
	arena = w.arena;

	/*
	 * The watch cache first (when on and the selector's instance is known
	 * from an earlier claim): what its events changed is made due before the
	 * claim, so this pass claims it.  A woken pass, which acts on new intents
	 * only, observes them from the cache too when it can: that costs nothing.
	 */
	if (watch_instance != NULL || !mlplat_deployments_watch)
		cached = watch_sync(pass, watch_instance ? watch_instance : "", &filled, note, sizeof(note));
	if (cached && !pass->woken)
		test_pass_hold();

	/*
	 * Full: a new leader's first pass and one every mlplat.full_resync_interval
	 * compare every live row with a LIST of the whole fleet and judge orphans.
	 * Between them a pass reads only the rows that changed or whose own resync
	 * is due, and observes just those.  A sweep under way goes on until its
	 * last chunk: one started by a refilled cache was otherwise left with its
	 * next chunk asked for at once (claim_full below) but never taken, so the
	 * leader ran an empty pass every millisecond until the next full resync
	 * (45 a second at 11,000 deployments and the default pass_row_limit).
	 */
	full = !pass->woken &&
		   (pass->epoch != full_epoch || filled || (sweep_after > 0 && pass->epoch == sweep_epoch) ||
			TimestampDifferenceExceeds(last_full, GetCurrentTimestamp(), mlplat_full_resync_interval_ms));
	/*
	 * A sweep under way takes every other pass, and the most overdue rows
	 * the passes between: a sweep walks ids in order, and rows it has not
	 * reached (new intents, waits on KServe) must not wait for its end —
	 * nor forever, when a refilled cache keeps starting it again (30,000 new
	 * deployments with the watch's 410s: 3,000 READY, then none for minutes).
	 */
	if (full && sweep_after > 0 && pass->epoch == sweep_epoch && !filled && swept_last)
		full = false;
	swept_last = full;
	if (!full && sweep_after > 0)
		pass->claim_full = true; /* the sweep's next chunk comes next, at once */
	if (full && (pass->epoch != sweep_epoch || filled))
		sweep_after = 0; /* a new leadership, or a refilled cache: from the start */
	if (full && sweep_after == 0)
	{
		sweep_epoch = pass->epoch;
		sweep_start = GetCurrentTimestamp();
		orphans_due = true;
	}
	chunk_after = full ? sweep_after : 0;
	claim(&w, full, chunk_after, &deps, &more);
	if (watch_instance == NULL || strcmp(watch_instance, w.instance) != 0)
	{
		if (watch_instance)
			pfree(watch_instance);
		watch_instance = MemoryContextStrdup(TopMemoryContext, w.instance);
		/* learned just now: the cache starts here (this pass is full, or its rows are claimed) */
		if (mlplat_deployments_watch)
			cached = watch_sync(pass, w.instance, &filled, note, sizeof(note));
	}
	items = NIL;
	/* what this pass compares with the cluster: all but a woken pass without the cache */
	observed = !pass->woken || cached;
	if (pass->woken && deps == NIL)
	{
		/*
		 * A commit that changed no intent (set_drift_policy, which makes the
		 * row's resync due now): look at once instead of at the next resync.
		 */
		if (cached)
			orphans_next_if_unowned(pass, NULL);
		pass->next_pass_ms = 1;
		return;
	}
	else if (!observed)
	{
		/*
		 * Woken by commits: act on the new intents at once.  Applying needs no
		 * observation (Server-Side Apply is idempotent and a DELETE of
		 * something gone succeeds); the follow-up pass observes the result.
		 */
	}
	else if (!full && deps == NIL && !(cached && orphans_due))
	{
		/* nothing changed and no resync due: nothing to read, nothing to ask */
		if (cached)
			orphans_next_if_unowned(pass, NULL);
		snprintf(pass->status, sizeof(pass->status), "0 deployments due, 0 requests%s", note);
		return;
	}
	else if (cached)
	{
		/* the watch keeps the cache current: no GET, no LIST; the chunk's objects only */
		foreach (lc, deps)
		{
			Deployment *d = lfirst(lc);
			const MlJsonValue *obj = mlplat_watch_cache_get(isvc_cache, arena, d->namespace, d->name);

			if (obj)
				items = lappend(items, (void *) obj);
		}
	}
	else
	{
		if (!full && list_length(deps) <= OBSERVE_GET_MAX)
		{
			List *ns_names = NIL;

			foreach (lc, deps)
			{
				Deployment *d = lfirst(lc);

				ns_names = lappend(lappend(ns_names, d->namespace), d->name);
			}
			why = mlplat_kube_get_each(arena, &ISVC, w.instance, ns_names, &items, &gets);
		}
		else
			why = mlplat_kube_list_kept(&ISVC, NULL, w.selector, isvc_kept, NULL, &items, &w.lists);
		if (why)
			ereport(ERROR, (errcode(ERRCODE_CONNECTION_FAILURE), errmsg("%s", why)));
	}
	/* orphans are judged by a pass that sees the fleet: the cache, or a LIST of it */
	judge_orphans = orphans_due && observed && (cached || w.lists > 0);

	/* match observed objects to deployments by "namespace/name" (hash: thousands of each) */
	{
		HASHCTL ctl;

		memset(&ctl, 0, sizeof(ctl));
		ctl.keysize = NAMEDATALEN * 2;
		ctl.entrysize = sizeof(DepByName);
		ctl.hcxt = w.cxt;
		by_name = hash_create("mlplat deployments by name", Max(64, list_length(deps)), &ctl,
							  HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	}
	foreach (lc, deps)
	{
		Deployment *d = lfirst(lc);
		char key[NAMEDATALEN * 2];
		DepByName *e;

		snprintf(key, sizeof(key), "%s/%s", d->namespace, d->name);
		e = hash_search(by_name, key, HASH_ENTER, NULL);
		e->d = d;
	}
	foreach (lc, items)
	{
		const MlJsonValue *obj = lfirst(lc);
		const char *ns = mlplat_json_text(obj, "metadata", "namespace", NULL);
		const char *name = mlplat_json_text(obj, "metadata", "name", NULL);
		bool matched = false;

		if (ns && name && strlen(ns) + strlen(name) + 2 <= NAMEDATALEN * 2)
		{
			char key[NAMEDATALEN * 2];
			DepByName *e;

			snprintf(key, sizeof(key), "%s/%s", ns, name);
			e = hash_search(by_name, key, HASH_FIND, NULL);
			if (e)
			{
				e->d->obj = obj;
				matched = true;
			}
		}
		/* ours by label and none of this chunk's: an orphan if no live row owns it (below) */
		if (!matched && judge_orphans && !cached && ns && name)
			candidates = lappend(candidates, psprintf("%s/%s", ns, name));
	}
	if (judge_orphans && cached)
		foreach (lc, mlplat_watch_cache_keys(isvc_cache))
			if (hash_search(by_name, lfirst(lc), HASH_FIND, NULL) == NULL)
				candidates = lappend(candidates, lfirst(lc));
	if (judge_orphans)
	{
		/*
		 * Ours by label, with no live deployment as the database says: an
		 * orphan — and not one already deleted, waiting for its finalizers:
		 * asked once is enough.
		 */
		foreach (lc, unowned(candidates))
		{
			const char *name;
			char *ns = key_split(lfirst(lc), &name);
			const MlJsonValue *obj;
			Deployment *o;

			if (ns == NULL)
				continue;
			obj = cached ? mlplat_watch_cache_get(isvc_cache, arena, ns, name) : find_listed(items, ns, name);
			if (obj == NULL || mlplat_json_text(obj, "metadata", "deletionTimestamp", NULL))
				continue;
			o = palloc0(sizeof(Deployment));
			o->namespace = ns;
			o->name = (char *) name;
			o->project = (char *) mlplat_json_text(obj, "metadata", "labels", MLPLAT_LABEL_PROJECT);
			o->action = DEP_DELETE;
			o->obj = obj;
			w.orphans = lappend(w.orphans, o);
		}
		orphans_due = false;
	}
	else if (cached)
		orphans_next_if_unowned(pass, by_name);

	/*
	 * An object found under a deployment's name is written or deleted only when
	 * it is its own; an orphan is torn down only when it carries the content id
	 * of a revision of a deployment of its namespace and name (one that ended,
	 * or whose row is gone while an apply of it landed late).
	 */
	judge_found(deps, w.instance, arena, false);
	judge_found(w.orphans, w.instance, arena, false);

	foreach (lc, deps)
	{
		Deployment *d = lfirst(lc);

		/* observed.terminating, from what this pass saw (a woken pass without the cache sees nothing) */
		if (observed)
		{
			const char *since;
			char *fins;

			if (d->obj == NULL || !mlplat_object_terminating(d->obj, &since, &fins, &d->terminating_json))
				d->terminating_json = "null";
			if (d->obj && mlplat_json_text(d->obj, "status", "deploymentMode", NULL))
			{
				StringInfoData m;

				initStringInfo(&m);
				escape_json(&m, mlplat_json_text(d->obj, "status", "deploymentMode", NULL));
				d->mode_json = text_kept(&m);
			}
		}
		if (!observed && d->status == MLPLAT_DEPLOYMENT_DELETING)
		{
			/*
			 * Unobserved: whatever holds the name is deleted only once it is seen
			 * to be the deployment's own — by the full pass that follows at once.
			 */
			d->new_status = d->status;
			d->retry_ms = -1;
			pass->next_pass_ms = 1;
		}
		else if (d->not_ours)
			deployment_not_ours(d);
		else
			deployment_decide(d, arena);
		if (d->action == DEP_APPLY && d->first_apply)
		{
			/* the artifact is checked first; the apply follows in a second batch */
			d->check = mlplat_artifact_check_new(d->id, d->desired_revision, d->attempts);
			d->check_span = dep_span(d, "artifact_check", MLPLAT_SPAN_CLIENT);
			checks = lappend(checks, d->check);
			/* nothing of ours was seen under the name: look before applying over it */
			d->look = d->obj == NULL;
		}
		else if (d->action == DEP_APPLY || d->action == DEP_REPAIR)
		{
			d->req = mlplat_kube_apply(w.batch, &ISVC, d->namespace, d->name, d->spec);
			d->ledger_action = d->action == DEP_REPAIR ? "REPAIR" : "APPLY";
			w.creates++;
		}
		else if (d->action == DEP_DELETE)
		{
			d->req = mlplat_kube_delete(w.batch, &ISVC, d->namespace, d->name);
			d->ledger_action = "DELETE";
			w.deletes++;
		}
		else if (d->new_status != d->status || (d->mark_observed && d->observed_generation != d->generation) ||
				 (d->drift_report && d->new_status == MLPLAT_DEPLOYMENT_DRIFTED &&
				  (d->status_reason == NULL || strcmp(d->reason, d->status_reason) != 0)))
		{
			d->write = true; /* a status change only (or reported drift at other paths) */
			w.writes++;
		}
		if (d->req)
			d->req_span = dep_span(d, d->action == DEP_DELETE ? "delete" : "apply", MLPLAT_SPAN_CLIENT);
		if (d->action == DEP_NONE && d->new_status != d->status &&
			(d->new_status == MLPLAT_DEPLOYMENT_READY || d->new_status == MLPLAT_DEPLOYMENT_FAILED))
		{
			/* the wait from the apply (an earlier pass) to KServe's verdict or the deadline */
			MlplatSpan *s = dep_span(d, "readiness_wait", MLPLAT_SPAN_INTERNAL);

			mlplat_span_start_after(s, "deployments.apply");
			mlplat_span_attr_text(s, "mlplat.status", mlplat_status_name(MLPLAT_MACHINE_DEPLOYMENT, d->new_status));
			mlplat_span_end(s, d->new_status == MLPLAT_DEPLOYMENT_READY ? NULL : d->reason);
		}
		if (d->not_ours == NULL &&
			(d->new_status == MLPLAT_DEPLOYMENT_DEPLOYING || d->new_status == MLPLAT_DEPLOYMENT_DELETING ||
			 (d->new_status == MLPLAT_DEPLOYMENT_DRIFTED && !d->drift_report)))
			pass->next_pass_ms = FOLLOW_UP_MS;
	}
	foreach (lc, w.orphans)
	{
		Deployment *o = lfirst(lc);

		if (o->not_ours == NULL)
		{
			o->req = mlplat_kube_delete(w.batch, &ISVC, o->namespace, o->name);
			w.deletes++;
		}
	}

	look_before_apply(deps, by_name, w.batch, &w.lists, cached, w.instance);
	/* the artifact checks' HEADs run in the same batch as everything else */
	mlplat_artifact_begin(checks, w.batch);
	if (!note_requests(&w, deps))
		return;
	mlplat_http_batch_run(w.batch);

	foreach (lc, deps)
	{
		Deployment *d = lfirst(lc);

		if (d->req)
			apply_result(d, pass);
	}
	foreach (lc, w.orphans)
	{
		Deployment *o = lfirst(lc);
		MlplatKubeResult res;

		if (o->req == NULL)
		{
			/* mlplat's labels, but not provably mlplat's: reported, not deleted */
			o->ledger_outcome = "CONFLICT";
			o->error = psprintf("not this installation's InferenceService: %s; not deleted", o->not_ours);
			continue;
		}
		mlplat_kube_write_result(o->req, true, &res);
		o->http_status = res.status;
		o->ledger_outcome = res.outcome == MLPLAT_KUBE_OK ? "OK" : "FAILED";
		o->error = res.message;
	}

	write_back(pass, deps, w.orphans, observed);
	if (full && more)
	{
		/* the sweep goes on with the next chunk, at once (pass->claim_full) */
		sweep_after = ((Deployment *) llast(deps))->id;
	}
	else if (full)
	{
		/*
		 * The last chunk of a sweep of several saw only the ids after the one
		 * before it, while the rows below waited: their passes between the
		 * chunks asked for the next chunk at once, not for their follow-up,
		 * and the events this pass applied made rows due that it did not
		 * claim.  Waiting for the resync left them there (1,000 new
		 * deployments, the watch on: the last 61 READY 1.3 s after their
		 * events): the next pass, one that claims what is changing or due,
		 * comes at once.
		 */
		if (chunk_after > 0)
			pass->next_pass_ms = 1;
		/* only a sweep that got this far counts: a failed chunk is tried again */
		sweep_after = 0;
		full_epoch = pass->epoch;
		last_full = sweep_start;
	}
	/* written first, so a download never delays the others' results */
	if (checks != NIL)
		apply_checked(&w, deps, checks);
	mlplat_pass_work_status(&w, psprintf(", %d GETs%s", gets, note), "%d deployments%s", list_length(deps),
							full		  ? " (full pass)"
							: pass->woken ? " (woken)"
										  : " due");
}
