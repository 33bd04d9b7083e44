/*
 * runs.c — the runs reconciler: runs and pipeline runs as Argo Workflows.
 *
 * One pass:
 *   1. claim every active run (short transaction; PENDING ones with their render);
 *   2. observe: LIST Workflows carrying our managed-by and instance labels across all
 *      namespaces, paginated — never one GET per run;
 *   3. decide per run (pure: run_decide): create once (POST; 409 AlreadyExists adopts,
 *      and a workflow seen by LIST for a run not yet marked submitted is adopted too),
 *      merge-patch spec.shutdown: Terminate for a cancel, or only record what Argo says;
 *      every request is noted in mlplat.unanswered_writes (committed) before the batch
 *      sends them all concurrently;
 *   4. write back in a new short transaction, CAS on row_version and the leader epoch,
 *      plus a ledger row per external write (CREATE, ADOPT, PATCH), and remove the notes
 *      of the writes whose answer it records.
 * A run that was never marked submitted may still have a workflow: the leader that
 * created it may have been terminated before its write-back.  Its note says so; the
 * workflow is looked for (the LIST) and adopted when found, and a cancel concludes
 * "never created" only once the unanswered create had mlplat.unanswered_write_grace to
 * land — never from the database alone.  A workflow is adopted (found by LIST, or
 * answered 409 and then read) only when it carries mlplat's labels and the render's
 * content id (annotation mlplat.io/content-id); a look-alike is a conflict, reported
 * in the status and the ledger (ADOPT CONFLICT), and not touched.
 * Step rows are sent only when the workflow's resourceVersion moved, and the SQL side
 * writes only the rows that differ.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "mlplat/backoff.h"
#include "mlplat/guc.h"
#include "mlplat/http.h"
#include "mlplat/json.h"
#include "mlplat/kube.h"
#include "mlplat/labels.h"
#include "mlplat/ledger.h"
#include "mlplat/observe.h"
#include "mlplat/pass_text.h"
#include "mlplat/pass_work.h"
#include "mlplat/reconcile.h"
#include "mlplat/retry.h"
#include "mlplat/seam.h"
#include "mlplat/span.h"
#include "mlplat/unanswered.h"

static const MlplatKubeResource WORKFLOW = { "argoproj.io", "v1alpha1", "workflows", true };

/* how soon to look again while a workflow moves */
#define FOLLOW_UP_MS 300

typedef enum RunAction
{
	RUN_NONE = 0,
	RUN_CREATE,	 /* POST the workflow */
	RUN_SHUTDOWN /* merge-patch spec.shutdown: Terminate */
} RunAction;

typedef struct Run
{
	/* claimed: the attributes of mlplat.run_claim */
	MLPLAT_SEAM_MEMBERS(run_claim)
	const MlplatUnanswered *unanswered; /* a write to its workflow never answered */
	char *ledger_error;					/* the ledger's error when error is the tenant's version */
	const char *content_id;				/* the render's, when it has one (never submitted) */
	const char *instance;
	/* observed */
	const MlJsonValue *obj;
	MlplatObservedObject holder; /* after a 409: what holds its workflow's name */
	/* decided */
	RunAction action;
	MlplatHttpRequest *req;
	MlplatRunStatus new_status;
	char *reason;
	char *error;
	int retry_ms; /* -1: no retry */
	bool mark_submitted;
	bool adopt;		  /* found without a recorded create: ledger ADOPT */
	bool settle_note; /* the unanswered write is resolved: remove its note */
	bool answered;	  /* this pass's write was answered: remove its own note */
	bool waiting;	  /* an unanswered create may still land: look again soon */
	bool conflict;	  /* a workflow of its name that is not its own */
	char *new_rv;	  /* resourceVersion to record with the nodes */
	char *nodes;	  /* JSON array of observed steps, or NULL */
	bool write;
	const char *ledger_action;
	const char *ledger_outcome;
	int http_status;
	MlplatSpan *span; /* trace span of req */
} Run;

/* ---------------------------------------------------------------- pure decisions */

static bool
phase_finished(const char *phase)
{
	return strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0 || strcmp(phase, "Error") == 0;
}

/*
 * The workflow's Pod nodes as [{name, node_id, type, phase, exit_code, started_at,
 * finished_at, message}], named by their task (displayName); a single run's root Pod
 * is "main".  *failed is set to the first failed step's name and message.
 */
static char *
nodes_json(const Run *r, const MlJsonValue *nodes, const char **failed, const char **failed_msg)
{
	StringInfoData s;
	bool first = true;

	*failed = NULL;
	*failed_msg = NULL;
	initStringInfo(&s);
	appendStringInfoChar(&s, '[');
	if (nodes && nodes->type == ML_JSON_OBJECT)
	{
		for (size_t i = 0; i < nodes->u.object.count; i++)
		{
			const MlJsonValue *n = nodes->u.object.members[i].value;
			const char *id = mlplat_json_text(n, "id", NULL, NULL);
			const char *type = mlplat_json_text(n, "type", NULL, NULL);
			const char *phase = mlplat_json_text(n, "phase", NULL, NULL);
			const char *name;

			if (type == NULL || strcmp(type, "Pod") != 0)
				continue; /* DAG/Steps containers: the run's own status covers them */
			if (id && strcmp(id, r->workflow) == 0)
				name = "main";
			else
				name = mlplat_json_text(n, "displayName", NULL, NULL);
			if (name == NULL)
				continue;
			if (!first)
				appendStringInfoChar(&s, ',');
			first = false;
			appendStringInfoString(
				&s, mlplat_json_object("name", name, "node_id", id, "type", type, "phase", phase, "exit_code",
									   mlplat_json_text(n, "outputs", "exitCode", NULL), "started_at",
									   mlplat_json_text(n, "startedAt", NULL, NULL), "finished_at",
									   mlplat_json_text(n, "finishedAt", NULL, NULL), "message",
									   mlplat_json_text(n, "message", NULL, NULL), NULL));
			if (*failed == NULL && phase && (strcmp(phase, "Failed") == 0 || strcmp(phase, "Error") == 0))
			{
				*failed = name;
				*failed_msg = mlplat_json_text(n, "message", NULL, NULL);
			}
		}
	}
	appendStringInfoChar(&s, ']');
	return s.data;
}

/*
 * Is a workflow found under this run's name the one this run's create made?  It must
 * carry mlplat's labels (this installation) and the render's content id.  NULL if it
 * is, else why not.
 */
static char *
not_ours(const Run *r, const MlJsonValue *obj)
{
	const char *cid = mlplat_object_content_id(obj);

	if (!mlplat_labelled_ours(obj, r->instance, NULL))
		return pstrdup("it does not carry mlplat's labels of this installation");
	if (r->content_id == NULL)
		return pstrdup("this run has no render to compare it with");
	if (cid == NULL || strcmp(cid, r->content_id) != 0)
		return psprintf("its content id is %s, the render's %s", cid ? cid : "absent", r->content_id);
	return NULL;
}

/* Report a workflow of the run's name that is not the run's own; touch nothing. */
static void
run_conflict(Run *r, const char *why, bool cancel)
{
	r->conflict = true;
	r->write = true;
	r->ledger_action = "ADOPT";
	r->ledger_outcome = "CONFLICT";
	r->error = psprintf("workflow %s/%s exists but is not this run's: %s; not adopted, not touched", r->namespace,
						r->workflow, why);
	if (cancel)
	{
		/* the name is held by another workflow: no create of this run can have made it */
		r->new_status = MLPLAT_RUN_CANCELLED;
		r->reason = psprintf("cancelled; %s", r->error);
		r->settle_note = r->unanswered != NULL;
	}
	else
	{
		r->reason = r->error;
		r->retry_ms = mlplat_retry_ms(true, r->attempts, r->id, 0);
	}
}

/* Decide what one run needs, from the claim and the observed workflow alone. */
static void
run_decide(Run *r)
{
	const char *phase;
	const char *rv;
	const char *failed;
	const char *failed_msg;
	const char *wf_msg;
	bool cancel = r->status == MLPLAT_RUN_CANCEL_REQUESTED;

	r->new_status = r->status;
	r->retry_ms = -1;

	if (r->obj == NULL)
	{
		if (!r->submitted)
		{
			if (cancel && r->unanswered && !mlplat_unanswered_settled(r->unanswered))
			{
				/*
				 * A create was sent and no answer recorded (its leader was terminated,
				 * or the answer lost): the workflow may still appear.  Cancelling now
				 * would leave it running unseen; wait for it to land or to have had
				 * the time to.
				 */
				r->waiting = true;
				return;
			}
			if (cancel)
			{
				r->new_status = MLPLAT_RUN_CANCELLED;
				r->reason = r->unanswered
								? psprintf("cancelled; the create of workflow %s/%s, sent %lld s ago without an answer, never made it",
										   r->namespace, r->workflow, (long long) (r->unanswered->age_ms / 1000))
								: pstrdup("cancelled before a workflow was submitted");
				r->settle_note = r->unanswered != NULL;
				r->write = true;
			}
			else if (r->due && r->manifest)
				r->action = RUN_CREATE;
			return;
		}
		/* submitted, and no longer there: someone else removed it; never resubmit silently */
		r->new_status = cancel ? MLPLAT_RUN_CANCELLED : MLPLAT_RUN_FAILED;
		r->reason = cancel
						? psprintf("workflow %s/%s is gone", r->namespace, r->workflow)
						: psprintf("workflow %s/%s disappeared outside mlplat; not resubmitted (mlplat.retry_run starts a new attempt)",
								   r->namespace, r->workflow);
		r->write = true;
		return;
	}

	/*
	 * there: adopt it if we never heard our create succeed (a lost response, or a leader
	 * terminated before its write-back), with a ledger row of its own — a cancel's PATCH
	 * in the same pass is recorded separately
	 */
	if (!r->submitted)
	{
		char *why = not_ours(r, r->obj);

		if (why)
		{
			/* reported once per retry period, not at every follow-up pass */
			if (cancel || r->due)
				run_conflict(r, why, cancel);
			return;
		}
		r->mark_submitted = true;
		r->adopt = true;
		r->write = true;
	}
	if (r->unanswered && (mlplat_unanswered_seen_settles(r->unanswered) || mlplat_unanswered_settled(r->unanswered)))
	{
		r->settle_note = true;
		r->write = true;
	}
	rv = mlplat_json_text(r->obj, "metadata", "resourceVersion", NULL);
	phase = mlplat_json_text(r->obj, "status", "phase", NULL);
	if (phase == NULL)
		phase = "";
	wf_msg = mlplat_json_text(r->obj, "status", "message", NULL);
	if (rv && (r->observed_rv == NULL || strcmp(rv, r->observed_rv) != 0))
	{
		r->new_rv = pstrdup(rv);
		r->write = true;
	}
	r->nodes = nodes_json(r, ml_json_object_get(ml_json_object_get(r->obj, "status"), "nodes"),
						  &failed, &failed_msg);
	if (r->new_rv == NULL)
		r->nodes = NULL; /* nothing moved since the last write-back */

	if (cancel)
	{
		const char *shutdown = mlplat_json_text(r->obj, "spec", "shutdown", NULL);

		if (strcmp(phase, "Succeeded") == 0)
		{
			r->new_status = MLPLAT_RUN_SUCCEEDED;
			r->reason = pstrdup("the workflow succeeded before the cancel took effect");
		}
		else if (phase_finished(phase))
		{
			r->new_status = MLPLAT_RUN_CANCELLED;
			r->reason = psprintf("workflow stopped: %s", wf_msg ? wf_msg : phase);
		}
		else if ((shutdown == NULL || strcmp(shutdown, "Terminate") != 0) && r->due)
			r->action = RUN_SHUTDOWN;
	}
	else if (strcmp(phase, "") == 0 || strcmp(phase, "Pending") == 0)
	{
		r->new_status = MLPLAT_RUN_SUBMITTED;
		r->reason = psprintf("workflow %s submitted", r->workflow);
	}
	else if (strcmp(phase, "Running") == 0)
	{
		r->new_status = MLPLAT_RUN_RUNNING;
		r->reason = psprintf("workflow %s running", r->workflow);
	}
	else if (strcmp(phase, "Succeeded") == 0)
	{
		r->new_status = MLPLAT_RUN_SUCCEEDED;
		r->reason = psprintf("workflow %s succeeded", r->workflow);
	}
	else if (strcmp(phase, "Failed") == 0 || strcmp(phase, "Error") == 0)
	{
		r->new_status = MLPLAT_RUN_FAILED;
		r->reason = failed
						? psprintf("step \"%s\" failed: %s", failed, failed_msg ? failed_msg : "no message")
						: psprintf("workflow %s %s: %s", r->workflow, strcmp(phase, "Error") == 0 ? "errored" : "failed",
								   wf_msg ? wf_msg : "no message");
	}
	if (r->new_status != r->status)
		r->write = true;
}

/* ---------------------------------------------------------------- I/O */

/* The seam (seam.h): mlplat.run_claim read into Run ... */
MLPLAT_SEAM_STATIC(claim_seam, run_claim, Run);

/* ... and mlplat.run_writeback built from RunWriteback (retry_ms < 0 is NULL) */
MLPLAT_SEAM_ROW_STATIC(writeback_seam, run_writeback, RunWriteback);

MlplatSeam *const mlplat_runs_seams[] = { &claim_seam, &writeback_seam, NULL };

static void
claim(MlplatPassWork *w, List **out)
{
	MlplatClaim c;
	ListCell *lc;

	mlplat_seam_claim_pass(w->pass, &claim_seam, "SELECT c FROM mlplat._runs_claim() c", 0, NULL, NULL, sizeof(Run),
						   true, 0, &c);
	foreach (lc, c.rows)
	{
		Run *r = lfirst(lc);

		r->unanswered = mlplat_unanswered_find(c.notes, r->id, mlplat_object_path(r->namespace, r->workflow), "CREATE");
	}
	*out = c.rows;
	mlplat_pass_work_claimed(w, c.instance, NULL);
}

static void
request_result(Run *r, MlplatPass *pass)
{
	MlplatKubeResult res;

	/* a 404 is retried: the namespace is not there yet, or the workflow went under a patch */
	mlplat_kube_write_result(r->req, false, &res);
	r->http_status = res.status;
	r->write = true;
	if (mlplat_write_answered(res.status))
		r->answered = true;
	if (res.outcome == MLPLAT_KUBE_EXISTS && r->action == RUN_CREATE)
	{
		/*
		 * Our deterministic name is taken: the create of an earlier try may have
		 * landed — or someone else's workflow holds the name.  Read it before
		 * adopting (existing_answer).
		 */
		r->ledger_action = "CREATE";
		r->ledger_outcome = "CONFLICT";
		r->error = res.message;
		return;
	}
	if (res.outcome != MLPLAT_KUBE_OK)
	{
		/* any other outcome is a failed write (mlplat_write_failed tells which kind) */
		mlplat_write_failed(&res, r->attempts, r->id, &r->ledger_outcome, &r->error, &r->ledger_error, &r->retry_ms);
		/* come back when a retry is due, not only at the next resync */
		if (res.outcome != MLPLAT_KUBE_FAILED)
			mlplat_pass_wake_within(pass, r->retry_ms);
		return;
	}
	r->ledger_outcome = "OK";
	if (r->action == RUN_CREATE)
	{
		r->mark_submitted = true;
		r->new_status = MLPLAT_RUN_SUBMITTED;
		r->reason = psprintf("workflow %s submitted", r->workflow);
	}
	else
		r->reason = psprintf("shutdown requested on workflow %s; waiting for it to stop", r->workflow);
	pass->next_pass_ms = FOLLOW_UP_MS;
}

/*
 * After 409 answers: read each workflow that holds a run's name, in one follow-up
 * round, and adopt it when it is the run's own; a look-alike is a conflict
 * (run_conflict).
 */
static MlplatObservedObject *
existing_ask(MlplatPassWork *w, void *row, MlplatHttpBatch *batch)
{
	Run *r = row;

	if (r->req && r->action == RUN_CREATE && r->ledger_outcome && strcmp(r->ledger_outcome, "CONFLICT") == 0)
	{
		mlplat_observe_get(&r->holder, batch, &WORKFLOW, r->namespace, r->workflow);
		return &r->holder;
	}
	return NULL;
}

static void
existing_answer(MlplatPassWork *w, void *row, const MlplatObservedObject *seen)
{
	Run *r = row;
	const MlJsonValue *obj = seen->obj;
	char *why;

	if (seen->state != MLPLAT_OBSERVED_FOUND)
	{
		/* could not read it (gone again, or a failed GET): the next pass looks again */
		r->ledger_outcome = "RETRY";
		r->retry_ms = mlplat_retry_ms(false, r->attempts, r->id, 0);
		return;
	}
	r->error = NULL;
	why = not_ours(r, obj);
	if (why)
	{
		run_conflict(r, why, false); /* the row: ADOPT CONFLICT, with the 409 */
		return;
	}
	/* the create of an earlier try landed: adopt it */
	r->ledger_action = "ADOPT";
	r->ledger_outcome = "OK";
	r->mark_submitted = true;
	r->new_status = MLPLAT_RUN_SUBMITTED;
	r->reason = psprintf("adopted the existing workflow %s", r->workflow);
	w->pass->next_pass_ms = FOLLOW_UP_MS;
}

/* the write-back row of r (and the note it settles, its ledger rows and span) */
static bool
run_row(MlplatWriteback *wb, void *entity, void *row)
{
	Run *r = entity;
	RunWriteback *w = row;

	if (r->settle_note)
		mlplat_write_notes_add(&wb->settled, r->id, mlplat_object_path(r->namespace, r->workflow), NULL);
	else if (r->answered)
		mlplat_write_notes_answered(&wb->settled, r->id, mlplat_object_path(r->namespace, r->workflow), NULL,
									r->action == RUN_CREATE && mlplat_write_made(r->http_status));
	if (!r->write)
		return false;
	w->status = r->new_status;
	w->reason = r->reason;
	w->error = r->error;
	w->retry_ms = r->retry_ms;
	w->submitted = r->mark_submitted;
	w->observed_rv = r->new_rv;
	w->nodes = r->nodes;

	/*
	 * The external write happened whether or not the row's CAS held (an intent may
	 * have landed meanwhile): record it either way; the ledger checks the epoch.
	 */
	if (r->adopt)
		mlplat_ledger_batch_add(wb->ledger, "run", r->id, r->project, "ADOPT", "OK", NULL, NULL, 0, NULL,
								mlplat_trace_id_of(r->traceparent), mlplat_object_path(r->namespace, r->workflow));
	if (r->ledger_action)
		mlplat_ledger_batch_add(wb->ledger, "run", r->id, r->project, r->ledger_action, r->ledger_outcome, NULL, NULL,
								r->http_status, r->ledger_error ? r->ledger_error : r->error,
								mlplat_trace_id_of(r->traceparent), mlplat_object_path(r->namespace, r->workflow));
	wb->spans = lappend(wb->spans, r->span);
	return true;
}

/* Returns the step rows the write-back wrote. */
static int64
write_back(MlplatPass *pass, List *runs)
{
	MlplatWriteback wb;
	int64 step_rows;

	mlplat_writeback_begin(&wb, pass, &writeback_seam, &claim_seam);
	mlplat_writeback_rows(&wb, runs, run_row, "SELECT * FROM mlplat._runs_writeback_set($1, $2)", NULL);
	step_rows = wb.rows->returned_sum;
	mlplat_writeback_end(&wb);
	return step_rows;
}

void
mlplat_runs_pass(MlplatPass *pass)
{
	MlplatPassWork w;
	List *runs = NIL;
	List *items;
	HTAB *by_name;
	HASHCTL ctl;
	ListCell *lc;
	int64 step_rows;
	TimestampTz t0,
		t_claim,
		t_list,
		t_http;

	mlplat_pass_work_begin(&w, pass);
	t0 = GetCurrentTimestamp();
	claim(&w, &runs);
	t_claim = GetCurrentTimestamp();
	if (runs == NIL)
	{
		/* nothing active: finished runs' workflows are Argo's to keep or collect */
		snprintf(pass->status, sizeof(pass->status), "no active runs");
		return;
	}
	foreach (lc, runs)
	{
		Run *r = lfirst(lc);
		MlJsonError err;
		const MlJsonValue *m;

		r->instance = w.instance;
		if (r->manifest && (m = ml_json_parse(w.arena, r->manifest, strlen(r->manifest), NULL, &err)) != NULL)
			r->content_id = mlplat_object_content_id(m);
	}
	items = mlplat_pass_work_list(&w, &WORKFLOW, NULL);
	t_list = GetCurrentTimestamp();

	/* match observed workflows to runs by namespace/name, through a hash: 1,000s of runs */
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = NAMEDATALEN * 2 + 64;
	ctl.entrysize = ctl.keysize + sizeof(Run *);
	ctl.hcxt = w.cxt;
	by_name = hash_create("mlplat runs", Max(list_length(runs), 16), &ctl, HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
	foreach (lc, runs)
	{
		Run *r = lfirst(lc);
		char key[NAMEDATALEN * 2 + 64];
		char *entry;

		snprintf(key, sizeof(key), "%s/%s", r->namespace, r->workflow);
		entry = hash_search(by_name, key, HASH_ENTER, NULL);
		memcpy(entry + ctl.keysize, &r, sizeof(Run *));
	}
	foreach (lc, items)
	{
		const MlJsonValue *obj = lfirst(lc);
		const char *ns = mlplat_json_text(obj, "metadata", "namespace", NULL);
		const char *name = mlplat_json_text(obj, "metadata", "name", NULL);
		char key[NAMEDATALEN * 2 + 64];
		char *entry;
		Run *r;

		if (ns == NULL || name == NULL || strlen(ns) + strlen(name) + 2 > sizeof(key))
			continue;
		snprintf(key, sizeof(key), "%s/%s", ns, name);
		entry = hash_search(by_name, key, HASH_FIND, NULL);
		if (entry == NULL)
			continue; /* a finished run's workflow, or an earlier attempt: left as Argo keeps it */
		memcpy(&r, entry + ctl.keysize, sizeof(Run *));
		r->obj = obj;
	}

	foreach (lc, runs)
	{
		Run *r = lfirst(lc);

		run_decide(r);
		if (r->action == RUN_CREATE)
		{
			r->req = mlplat_kube_create(w.batch, &WORKFLOW, r->namespace, r->manifest);
			r->ledger_action = "CREATE";
			w.creates++;
		}
		else if (r->action == RUN_SHUTDOWN)
		{
			r->req = mlplat_kube_merge_patch(w.batch, &WORKFLOW, r->namespace, r->workflow,
											 "{\"spec\":{\"shutdown\":\"Terminate\"}}");
			r->ledger_action = "PATCH";
			w.writes++;
		}
		if (r->waiting && (pass->next_pass_ms <= 0 || pass->next_pass_ms > 1000))
			pass->next_pass_ms = 1000;
		if (r->req)
		{
			mlplat_write_notes_add(&w.sending, r->id, mlplat_object_path(r->namespace, r->workflow), r->ledger_action);
			r->span = mlplat_span_begin(r->traceparent, r->action == RUN_CREATE ? "runs.submit" : "runs.cancel",
										MLPLAT_SPAN_CLIENT);
			mlplat_span_set_entity(r->span, r->project, "run", r->id);
			mlplat_span_attr_text(r->span, "k8s.namespace.name", r->namespace);
			mlplat_span_attr_text(r->span, "mlplat.workflow", r->workflow);
		}
		if (r->obj != NULL && !phase_finished(mlplat_json_text(r->obj, "status", "phase", NULL) ? mlplat_json_text(r->obj, "status", "phase", NULL) : ""))
			pass->next_pass_ms = FOLLOW_UP_MS; /* still moving: look again soon */
	}

	/* the ledger's write-ahead: what is about to be sent is on record before it is sent */
	if (!mlplat_pass_work_notes_commit(&w, "requests"))
		return;
	mlplat_http_batch_run(w.batch);
	t_http = GetCurrentTimestamp();

	foreach (lc, runs)
	{
		Run *r = lfirst(lc);

		if (r->req)
		{
			request_result(r, pass);
			mlplat_span_end_request(r->span, r->req, r->http_status,
									strcmp(r->ledger_outcome ? r->ledger_outcome : "OK", "OK") == 0
										? NULL
										: (r->error ? r->error : "request failed"));
		}
	}

	mlplat_pass_work_follow_up(&w, runs, existing_ask, existing_answer);
	step_rows = write_back(pass, runs);
	/* the shutdowns (PATCH) count as writes */
	mlplat_pass_work_status(&w,
							psprintf("; ms claim %ld list %ld http %ld write %ld",
									 TimestampDifferenceMilliseconds(t0, t_claim),
									 TimestampDifferenceMilliseconds(t_claim, t_list),
									 TimestampDifferenceMilliseconds(t_list, t_http),
									 TimestampDifferenceMilliseconds(t_http, GetCurrentTimestamp())),
							"%d active runs, %lld step rows", list_length(runs), (long long) step_rows);
}
