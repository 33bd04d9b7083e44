/*
 * lab_runs.c — the lab_runs reconciler: Model Lab runs and probes as Kubernetes Jobs
 * pinned to a lab node (docs/lab.md; the database half is sql/install/39_api_lab.sql).
 *
 * One pass:
 *   1. observe the lab Nodes (LIST, label mlplat.io/lab=true) and record them
 *      (mlplat._lab_observe_nodes), so the claim's assessment sees fresh evidence: only
 *      when due (resync, half the node max age) or when the claim may take a lease;
 *   2. claim (short transaction): the SQL side settles what needs no request (cancels
 *      without a create, queue deadlines, retention), takes node leases FIFO and returns,
 *      as mlplat.lab_run_claim, every run whose Job must be looked at, with the Secret and
 *      Job to create while DISPATCHED;
 *   3. LIST Jobs and Secrets of the lab worker carrying our managed-by and instance labels;
 *   4. decide per run (pure: lab_decide): create the Secret lab-<id>-input, then the Job
 *      lab-<id>-<attempt> (409 adopts only an object with our labels and the render's
 *      content id; anything else is a conflict and is not touched); a cancelled run's Job,
 *      or a failed attempt's, is deleted with propagationPolicy=Foreground, so "absent"
 *      means its Pods are gone; so is a Job past the run deadline; a Job that vanished
 *      under a running run is JOB_DISAPPEARED; a finished run's Job and Secret are deleted;
 *      on a resync, lab Jobs and Secrets of this installation that no claimed run owns are
 *      deleted (ORPHAN_TEARDOWN); every write to a run's own objects is noted in
 *      mlplat.unanswered_writes (committed) before it is sent;
 *   5. read a completed attempt's output object with a bounded GET (max_output_bytes + 1);
 *   6. write back (mlplat.lab_run_writeback[], CAS on row_version and the leader epoch),
 *      a ledger row per external write, then delete the ingested output objects.
 * The node lease is released only by the write-back of a Job seen absent (event GONE).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "mlplat/artifact.h"
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
#include "mlplat/reconcile_sql.h"
#include "mlplat/seam.h"
#include "mlplat/span.h"
#include "mlplat/unanswered.h"

static const MlplatKubeResource NODE = { "", "v1", "nodes", false };
static const MlplatKubeResource SECRET = { "", "v1", "secrets", true };
static const MlplatKubeResource JOB = { "batch", "v1", "jobs", true };

#define LAB_COMPONENT "lab-worker"
#define FOLLOW_UP_MS 300

typedef enum LabWrite
{
	LAB_WRITE_NONE = 0,
	LAB_WRITE_CREATE,
	LAB_WRITE_DELETE_FOREGROUND,
	LAB_WRITE_DELETE
} LabWrite;

typedef struct LabRun
{
	/* claimed: the attributes of mlplat.lab_run_claim */
	MLPLAT_SEAM_MEMBERS(lab_run_claim)
	/* notes of writes never answered */
	const MlplatUnanswered *job_note;
	const MlplatUnanswered *secret_note;
	/* observed */
	const MlJsonValue *job_obj;
	const MlJsonValue *secret_obj;
	const char *job_cid; /* the render's content id */
	const char *secret_cid;
	/* decided */
	LabWrite job_write;
	LabWrite secret_write;
	bool read_output;
	bool adopt_job;			 /* found without a recorded create */
	bool adopt_secret;		 /* the input Secret, likewise */
	bool settle_secret_note; /* found, or not made within the grace */
	bool waiting;
	bool job_made;	   /* this pass's Job create was answered 2xx, or the 409 adopted */
	char *blocked_by;  /* why a request it needs was refused or could not be made */
	char *refused_by;  /* why its Secret or Job create was refused for good (WORKER_REFUSED) */
	const char *event; /* write-back event, NULL: none */
	char *observation; /* jsonb text */
	char *output;
	bool delete_output; /* after an ingest whose CAS held */
	char *conflict;
	const char *conflict_object; /* the name it is about; NULL: the Job's */
	const char *conflict_action; /* ledger action of a conflict the LIST showed (ADOPT, DELETE) */
	bool unobserved;			 /* its Secrets could not be listed: nothing decided */
	/* requests */
	MlplatHttpRequest *job_req;
	MlplatHttpRequest *secret_req;
	MlplatObservedObject output_seen; /* the completed attempt's output, read from the store */
	MlplatHttpRequest *delete_req;	  /* the ingested output's removal */
} LabRun;

/* ---------------------------------------------------------------- the seam */

MLPLAT_SEAM_STATIC(claim_seam, lab_run_claim, LabRun);

MLPLAT_SEAM_ROW_STATIC(writeback_seam, lab_run_writeback, LabWriteback);

/* the Nodes a LIST observed, recorded before the claim assesses them (mlplat._lab_observe_nodes) */
MLPLAT_SEAM_ROW_STATIC(node_seam, lab_node_observed, LabNodeRow);

MlplatSeam *const mlplat_lab_runs_seams[] = { &claim_seam, &writeback_seam, &node_seam, NULL };

/* ---------------------------------------------------------------- pure decisions */

/* The status of a condition of the given type ("True", ...), or NULL. */
static const MlJsonValue *
condition(const MlJsonValue *obj, const char *type)
{
	const MlJsonValue *conds = ml_json_object_get(ml_json_object_get(obj, "status"), "conditions");

	if (conds == NULL || conds->type != ML_JSON_ARRAY)
		return NULL;
	for (size_t i = 0; i < conds->u.array.count; i++)
	{
		const MlJsonValue *c = conds->u.array.items[i];

		if (mlplat_str_same(mlplat_json_text(c, "type", NULL, NULL), type) &&
			mlplat_str_same(mlplat_json_text(c, "status", NULL, NULL), "True"))
			return c;
	}
	return NULL;
}

/*
 * Is an object found under a run's Job or Secret name the one this installation's render
 * made?  It must carry mlplat's labels of this installation, the lab worker's component
 * label and the render's content id.  NULL if it is, else why not.
 */
static char *
not_ours(const MlJsonValue *obj, const char *instance, const char *cid)
{
	const char *got = mlplat_object_content_id(obj);

	if (!mlplat_labelled_ours(obj, instance, LAB_COMPONENT))
		return pstrdup("it does not carry mlplat's lab labels of this installation");
	if (cid == NULL)
		return got ? psprintf("its content id %s is not that of this installation's render of the run its name names", got)
				   : pstrdup("it carries no content id");
	if (!mlplat_str_same(got, cid))
		return psprintf("its content id is %s, the render's %s", got ? got : "absent", cid);
	return NULL;
}

static char *
observation_json(const LabRun *r, const char *what)
{
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfoString(&s, "{\"job\":");
	escape_json(&s, r->job_name ? r->job_name : "");
	if (r->job_obj)
	{
		int64 n;

		if (mlplat_json_int(r->job_obj, "status", "active", &n))
			appendStringInfo(&s, ",\"active\":%lld", (long long) n);
		if (mlplat_json_int(r->job_obj, "status", "ready", &n))
			appendStringInfo(&s, ",\"ready\":%lld", (long long) n);
		if (mlplat_json_int(r->job_obj, "status", "failed", &n))
			appendStringInfo(&s, ",\"failed\":%lld", (long long) n);
		if (mlplat_json_text(r->job_obj, "metadata", "deletionTimestamp", NULL))
			appendStringInfoString(&s, ",\"terminating\":true");
	}
	if (what)
	{
		appendStringInfoString(&s, ",\"seen\":");
		escape_json(&s, what);
	}
	if (r->conflict)
	{
		appendStringInfoString(&s, ",\"conflict\":");
		escape_json(&s, r->conflict);
	}
	appendStringInfoChar(&s, '}');
	return s.data;
}

/*
 * A look-alike under one of the run's names (labels, but not this run's content id): reported
 * (status reason, ledger action CONFLICT) and never touched; a second one adds to the reason.
 */
static void
lab_conflict(LabRun *r, const char *kind, const char *name, const char *why, const char *action)
{
	char *one = psprintf("%s %s/%s exists but is not this run's: %s; %s", kind, r->namespace, name, why,
						 strcmp(action, "ADOPT") == 0 ? "not adopted, not touched" : "not deleted, not touched");

	r->conflict = r->conflict ? psprintf("%s; %s", r->conflict, one) : one;
	if (r->conflict_action == NULL)
	{
		r->conflict_action = action;
		r->conflict_object = name;
	}
}

/*
 * Would this pass delete the run's Job or Secret if it is its own?  Then the content id of
 * an object found under its name is asked of the database first (lab_objects_known).
 */
static bool
lab_may_delete(const LabRun *r)
{
	return r->finished || r->past_deadline || r->status == MLPLAT_LAB_RUN_CANCEL_REQUESTED ||
		   r->status == MLPLAT_LAB_RUN_RETRY_WAIT;
}

/* Decide what one run needs, from the claim and the observed Job and Secret alone. */
static void
lab_decide(LabRun *r, const char *instance)
{
	bool cancel = r->status == MLPLAT_LAB_RUN_CANCEL_REQUESTED;
	bool retry_wait = r->status == MLPLAT_LAB_RUN_RETRY_WAIT;
	bool terminating = r->job_obj && mlplat_json_text(r->job_obj, "metadata", "deletionTimestamp", NULL);
	const MlJsonValue *failed;

	/*
	 * A Job under the run's name that is not its own is reported and never touched: while
	 * DISPATCHED the run waits; when the run ends (cancel, deadline, a failed attempt, a
	 * finished run) its own Job is not there, and the decision goes on as if it were absent.
	 * One made by a create whose answer no write-back recorded is adopted (ledger ADOPT),
	 * also when a cancel came in the meantime (it is then deleted the normal way).
	 */
	if (r->job_obj && (r->status == MLPLAT_LAB_RUN_DISPATCHED || lab_may_delete(r)))
	{
		char *why = not_ours(r->job_obj, instance, r->job_cid);
		bool ending = lab_may_delete(r);

		if (why)
		{
			lab_conflict(r, "job", r->job_name, why, ending ? "DELETE" : "ADOPT");
			if (!ending)
				return;
			r->job_obj = NULL;
			terminating = false;
		}
		else if (r->job_note && mlplat_unanswered_seen_settles(r->job_note) &&
				 (r->status == MLPLAT_LAB_RUN_DISPATCHED || cancel))
			r->adopt_job = true; /* created by a pass whose answer was lost */
	}

	/* a finished run: its Job and Secret go; the lease goes when the Job is seen absent */
	if (r->finished)
	{
		if (r->secret_obj && !mlplat_json_text(r->secret_obj, "metadata", "deletionTimestamp", NULL))
		{
			char *why = not_ours(r->secret_obj, instance, r->secret_cid);

			if (why)
				lab_conflict(r, "secret", r->secret_name, why, "DELETE");
			else
				r->secret_write = LAB_WRITE_DELETE;
		}
		if (r->job_obj == NULL)
			r->event = "GONE";
		else if (!terminating)
			r->job_write = LAB_WRITE_DELETE_FOREGROUND;
		else
			r->waiting = true;
		return;
	}

	if (r->job_obj == NULL)
	{
		if (r->job_name == NULL || retry_wait)
		{
			/* a failed attempt's Job is gone: the next attempt may be dispatched */
			if (retry_wait)
				r->event = "GONE";
			return;
		}
		if (cancel && r->job_note && !mlplat_unanswered_settled(r->job_note))
		{
			/* a create was sent without an answer: it may still land; look again */
			r->waiting = true;
			return;
		}
		if (cancel)
		{
			r->event = "GONE";
			r->observation = observation_json(r, "absent");
			return;
		}
		if (r->status == MLPLAT_LAB_RUN_DISPATCHED && r->past_deadline)
		{
			/* nothing is created past the run deadline; an unanswered create may still land */
			if (r->job_note && !mlplat_unanswered_settled(r->job_note))
				r->waiting = true;
			else
			{
				r->event = "RUN_DEADLINE";
				r->observation = observation_json(r, "absent after the run deadline");
			}
			return;
		}
		if (r->status == MLPLAT_LAB_RUN_DISPATCHED && r->job_created)
		{
			/*
			 * The create was answered and recorded, and the Job is gone: it was removed outside
			 * mlplat, as under a RUNNING run (JOB_DISAPPEARED), and is not made again.  Only a
			 * create never answered (no record; a note, if any) is looked for and made.
			 */
			r->event = "DISAPPEARED";
			r->observation = observation_json(r, "disappeared");
			return;
		}
		if (r->status == MLPLAT_LAB_RUN_DISPATCHED)
		{
			char *why;

			if (r->secret_obj == NULL)
				r->secret_write = LAB_WRITE_CREATE;
			else if ((why = not_ours(r->secret_obj, instance, r->secret_cid)) != NULL)
			{
				/* a Secret under the run's name that is not its input: no Job mounts it */
				lab_conflict(r, "secret", r->secret_name, why, "ADOPT");
				return;
			}
			r->job_write = LAB_WRITE_CREATE;
			return;
		}
		/* RUNNING and gone: past the run deadline our foreground delete finished; else the
		 * Job was removed outside mlplat (JOB_DISAPPEARED, retriable within the budget) */
		r->event = r->past_deadline ? "RUN_DEADLINE" : "DISAPPEARED";
		r->observation = observation_json(r, r->past_deadline ? "absent after the run deadline" : "disappeared");
		return;
	}

	/* the Job is there */
	if (retry_wait)
	{
		/* the failed attempt's Job (already recorded) goes before the next attempt starts */
		if (!terminating)
			r->job_write = LAB_WRITE_DELETE_FOREGROUND;
		else
			r->waiting = true;
		return;
	}
	if (condition(r->job_obj, "Complete"))
	{
		r->read_output = true;
		r->observation = observation_json(r, "Complete");
		return;
	}
	if ((failed = condition(r->job_obj, "Failed")) != NULL)
	{
		const char *reason = mlplat_json_text(failed, "reason", NULL, NULL);

		r->event = mlplat_str_same(reason, "DeadlineExceeded") ? "DEADLINE" : "FAILED";
		r->observation = observation_json(r, reason ? reason : "Failed");
		return;
	}
	if (cancel || r->past_deadline)
	{
		/*
		 * A cancel, or the run deadline: the Job is deleted in the foreground and the run
		 * keeps its status (the claim names the deadline in status_reason) until a LIST no
		 * longer shows the Job; only then is it CANCELLED or FAILED RUN_DEADLINE_EXCEEDED.
		 */
		if (!terminating)
			r->job_write = LAB_WRITE_DELETE_FOREGROUND;
		else
			r->waiting = true;
		return;
	}
	if (r->status == MLPLAT_LAB_RUN_DISPATCHED)
	{
		int64 ready = 0;
		int64 active = 0;
		bool started;

		/*
		 * RUNNING means the worker runs: a Pod counts in active while still Pending (on a
		 * NotReady or cordoned Node, or waiting for a mount), so what decides is status.ready,
		 * the Pods that are Ready.  An API server that does not report it (before the
		 * JobReadyPods feature) leaves only active to go by.
		 */
		if (mlplat_json_int(r->job_obj, "status", "ready", &ready))
			started = ready > 0;
		else
			started = mlplat_json_int(r->job_obj, "status", "active", &active) && active > 0;
		if (started)
		{
			r->event = "STARTED";
			r->observation = observation_json(r, active > 0 ? "active" : "ready");
		}
		else if (r->adopt_job)
			r->observation = observation_json(r, "adopted");
	}
}

/*
 * The input Secret's note, once the Secret's writes are decided: a Secret found was made by
 * the noted create (adopted when it is the run's); one still absent after
 * mlplat.unanswered_write_grace was never made.  A create sent this pass answers it itself.
 */
static void
secret_note_decide(LabRun *r, const char *instance)
{
	if (r->secret_note == NULL)
		return;
	if (r->secret_obj && !mlplat_unanswered_seen_settles(r->secret_note))
		r->settle_secret_note = mlplat_unanswered_settled(r->secret_note); /* overtaken: the grace only */
	else if (r->secret_obj)
	{
		const char *cid = r->secret_cid ? r->secret_cid
										: mlplat_object_content_id(r->secret_obj);

		r->adopt_secret = not_ours(r->secret_obj, instance, cid) == NULL;
		r->settle_secret_note = true;
	}
	else
		r->settle_secret_note = r->secret_write == LAB_WRITE_NONE && mlplat_unanswered_settled(r->secret_note);
}

/* ---------------------------------------------------------------- I/O */

/* What the claim reads of each Node a LIST found (LabNodeRow, the seam's mlplat.lab_node_observed) */
static List *
node_rows(List *nodes)
{
	List *rows = NIL;
	ListCell *lc;

	foreach (lc, nodes)
	{
		const MlJsonValue *n = lfirst(lc);
		const char *gpus = mlplat_json_text(n, "status", "allocatable", "nvidia.com/gpu");
		const MlJsonValue *unsched = ml_json_object_get(ml_json_object_get(n, "spec"), "unschedulable");
		LabNodeRow *row = palloc0(sizeof(LabNodeRow));

		row->name = mlplat_json_text(n, "metadata", "name", NULL);
		if (row->name == NULL)
			continue;
		row->ready = condition(n, "Ready") != NULL;
		row->unschedulable = unsched && unsched->type == ML_JSON_BOOL && unsched->u.boolean;
		row->gpus = gpus ? (int32) strtol(gpus, NULL, 10) : 0;
		row->accelerator = mlplat_json_text(n, "metadata", "labels", "mlplat.io/accelerator");
		rows = lappend(rows, row);
	}
	return rows;
}

/* What the lab's claim does in its transaction besides the claim (MlplatClaimSteps). */
typedef struct LabClaimSteps
{
	bool listed; /* the Nodes were LISTed this pass: record them (nodes, LabNodeRow) */
	List *nodes;
	List *lab_namespaces;
} LabClaimSteps;

/* Before the claim: record the Nodes just listed, so that the claim assesses fresh evidence. */
static void
claim_record_nodes(MlplatPass *pass, void *arg)
{
	LabClaimSteps *st = arg;
	MlplatSeamArray *rows;
	Oid t[1];
	Datum v[1];
	ListCell *lc;

	(void) pass;
	if (!st->listed)
		return;
	rows = mlplat_seam_array_new(&node_seam);
	foreach (lc, st->nodes)
		mlplat_seam_array_add(rows, lfirst(lc));
	t[0] = get_array_type(node_seam.typoid);
	v[0] = mlplat_seam_array_datum(rows);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "mlplat: SPI_connect failed");
	if (mlplat_sql_exec("SELECT mlplat._lab_observe_nodes($1)", 1, t, v, NULL) != SPI_OK_SELECT)
		elog(ERROR, "mlplat: _lab_observe_nodes failed");
	SPI_finish();
}

/*
 * After the claim, on a resync: orphans are looked for in every project namespace mlplat
 * manages, as orphan Jobs are (their LIST spans the cluster): a Secret with this
 * installation's lab labels may be left where no lab run is recorded at all (a run purged,
 * a restore, a leader that died between its create and its write-back).  Read in the pass
 * context: list_secrets reads the list after the claim's commit.
 */
static void
claim_lab_namespaces(MlplatPass *pass, void *arg)
{
	LabClaimSteps *st = arg;

	if (pass->resync)
		st->lab_namespaces = mlplat_sql_text_list("SELECT mlplat._project_namespace(p.name) FROM mlplat.projects p "
												  "WHERE NOT mlplat.project_is_deleting(p.status) ORDER BY 1",
												  0, NULL, NULL, NULL);
}

/*
 * The claim, through the seam's claim step like every kind's, with the Nodes recorded
 * before it and the namespaces read after it in its transaction; then each run's notes.
 */
static void
claim(MlplatPassWork *w, bool listed, List *nodes, List **out, List **lab_namespaces)
{
	MlplatPass *pass = w->pass;
	LabClaimSteps st = { listed, node_rows(nodes), NIL };
	MlplatClaimSteps steps = { claim_record_nodes, claim_lab_namespaces, &st };
	MlplatClaim c;
	ListCell *lc;

	mlplat_seam_claim_pass_with(
		pass, &claim_seam, "SELECT c FROM mlplat._lab_runs_claim($1, $2, $3) c", 3,
		(Oid[]){ INT8OID, TEXTOID, TEXTOID },
		(Datum[]){ Int64GetDatum(pass->epoch), CStringGetTextDatum(pass->controller),
				   CStringGetTextDatum(mlplat_lab_payload_bucket ? mlplat_lab_payload_bucket : "") },
		sizeof(LabRun), true, 0, &steps, &c);
	foreach (lc, c.rows)
	{
		LabRun *r = lfirst(lc);

		if (r->job_name)
			r->job_note = mlplat_unanswered_find(c.notes, r->id, mlplat_object_path(r->namespace, r->job_name), NULL);
		r->secret_note = mlplat_unanswered_find(c.notes, r->id, mlplat_object_path(r->namespace, r->secret_name), NULL);
	}
	*out = c.rows;
	*lab_namespaces = st.lab_namespaces;
	mlplat_pass_work_claimed(w, c.instance, LAB_COMPONENT);
}

/* The position of ns in a list of namespace names, or -1. */
static int
ns_position(List *list, const char *ns)
{
	ListCell *lc;

	foreach (lc, list)
		if (strcmp((const char *) lfirst(lc), ns) == 0)
			return foreach_current_index (lc);
	return -1;
}

/* Is ns among the namespace names of list? */
static bool
ns_listed(List *list, const char *ns)
{
	return ns_position(list, ns) >= 0;
}

/* Add ns to the list of namespace names unless it is there. */
static List *
ns_add(List *list, const char *ns)
{
	if (ns == NULL || ns_listed(list, ns))
		return list;
	return lappend(list, (char *) ns);
}

/* Why a run in ns waits when its Secrets could not be LISTed there (status_reason, health). */
static char *
secrets_blocked(const char *ns, const char *error)
{
	return psprintf("lab Secrets in %s could not be listed: %s%s", ns, error ? error : "unknown error",
					error && strstr(error, "forbidden") ? "; mlplat needs RoleBinding mlplat-lab-inputs there" : "");
}

/*
 * The lab's Secrets, one LIST per namespace: the controller may read Secrets only in project
 * namespaces (RoleBinding mlplat-lab-inputs, made by the projects reconciler), so no LIST
 * spans the cluster.  The namespaces: those of the claimed runs and of the lab Jobs found,
 * and on a resync every project namespace (the claim names them).  A namespace whose LIST
 * fails (forbidden before its binding is made, or the API server) is returned in
 * *unobserved, and why in *whys (same position): its runs wait, blocked, and say why.
 */
static void
list_secrets(MlJsonArena *arena, List *runs, List *jobs, List *extra, const char *selector, List **secrets,
			 List **unobserved, List **whys, int *lists)
{
	List *namespaces = NIL;
	ListCell *lc;

	foreach (lc, runs)
		namespaces = ns_add(namespaces, ((LabRun *) lfirst(lc))->namespace);
	foreach (lc, jobs)
		namespaces = ns_add(namespaces, mlplat_json_text(lfirst(lc), "metadata", "namespace", NULL));
	foreach (lc, extra)
		namespaces = ns_add(namespaces, lfirst(lc));
	foreach (lc, namespaces)
	{
		const char *ns = lfirst(lc);
		char *err = mlplat_kube_list_all_in(arena, &SECRET, ns, selector, secrets, lists);

		if (err)
		{
			*unobserved = lappend(*unobserved, (char *) ns);
			*whys = lappend(*whys, secrets_blocked(ns, err));
		}
	}
}

static const char *
render_cid(MlJsonArena *arena, const char *render)
{
	MlJsonError err;
	const MlJsonValue *m;

	if (render == NULL || (m = ml_json_parse(arena, render, strlen(render), NULL, &err)) == NULL)
		return NULL;
	return mlplat_object_content_id(m);
}

/* The ledger outcome of an answered write; a 409 on a create is settled by verify_conflict. */
static const char *
write_outcome(const MlplatHttpRequest *req, LabWrite w, int *status, char **error)
{
	MlplatKubeResult res;

	mlplat_kube_write_result(req, w != LAB_WRITE_CREATE, &res);
	*status = res.status;
	*error = res.message;
	if (res.outcome == MLPLAT_KUBE_OK)
		return "OK";
	if (res.outcome == MLPLAT_KUBE_EXISTS && w == LAB_WRITE_CREATE)
		return "EXISTS";
	if (res.outcome == MLPLAT_KUBE_FAILED)
		return "FAILED";
	return "RETRY";
}

static const char *
write_action(LabWrite w)
{
	return w == LAB_WRITE_CREATE ? "CREATE" : "DELETE";
}

static MlplatHttpRequest *
send_write(MlplatHttpBatch *batch, const MlplatKubeResource *res, LabWrite w, const char *ns,
		   const char *name, const char *render)
{
	switch (w)
	{
		case LAB_WRITE_CREATE:
			return mlplat_kube_create(batch, res, ns, render);
		case LAB_WRITE_DELETE_FOREGROUND:
			return mlplat_kube_delete_foreground(batch, res, ns, name);
		case LAB_WRITE_DELETE:
			return mlplat_kube_delete(batch, res, ns, name);
		case LAB_WRITE_NONE:
			break;
	}
	return NULL;
}

/* One of a run's two objects, its Secret or its Job: what a write of it reads and sets. */
typedef struct LabSide
{
	LabRun *run;
	LabWrite *write;
	MlplatHttpRequest **req;
	const char *name;
	const char *render;
	const char *cid;
} LabSide;

static LabSide
side_of(LabRun *r, const MlplatKubeResource *res)
{
	if (res == &JOB)
		return (LabSide){ r, &r->job_write, &r->job_req, r->job_name, r->job, r->job_cid };
	return (LabSide){ r, &r->secret_write, &r->secret_req, r->secret_name, r->secret, r->secret_cid };
}

/*
 * After a 409 on a create: read the object that holds the name and adopt it only when it
 * is this render's (labels and content id); otherwise it is a conflict.
 */
static const char *
verify_conflict(MlJsonArena *arena, const MlplatKubeResource *res, LabRun *r, const char *name,
				const char *cid, const char *instance)
{
	MlplatHttpBatch *b = mlplat_http_batch_create(CurrentMemoryContext);
	MlplatObservedObject holder;
	char *why;

	mlplat_observe_get(&holder, b, res, r->namespace, name);
	mlplat_http_batch_run(b);
	mlplat_observe_got(&holder, arena);
	if (holder.state != MLPLAT_OBSERVED_FOUND)
		return "RETRY";
	why = not_ours(holder.obj, instance, cid);
	if (why)
	{
		r->conflict = psprintf("%s/%s exists but is not this run's: %s; not adopted, not touched", r->namespace, name, why);
		return "CONFLICT";
	}
	return "ADOPTED";
}

/*
 * A span for one answered request of a run (name "lab_runs.<what>"), under the trace of the
 * API call that started the run; built from the request's own timing, after the batch.
 */
static void
request_span(List **spans, const LabRun *r, const char *what, const char *object, const MlplatHttpRequest *req,
			 const char *error)
{
	MlplatSpan *s;

	if (req == NULL || req->started_at == 0)
		return;
	s = mlplat_span_begin_at(r->traceparent, psprintf("lab_runs.%s", what), MLPLAT_SPAN_CLIENT, req->started_at);
	mlplat_span_set_entity(s, r->project, "lab_run", r->id);
	mlplat_span_attr_text(s, "k8s.namespace.name", r->namespace);
	if (object)
		mlplat_span_attr_text(s, "mlplat.object", object); /* never the payload store's location */
	mlplat_span_end_request(s, req, req->status, error);
	*spans = lappend(*spans, s);
}

/* a ledger row of run r's, written with the write-back (the write happened whether or not a CAS holds) */
static void
ledger_add(List **rows, LabRun *r, const char *action, const char *outcome, int status, char *error,
		   char *object)
{
	mlplat_ledger_row_add(rows, r->id, r->project, action, outcome, status, error, mlplat_trace_id_of(r->traceparent),
						  object);
}

/*
 * Is a refused create (a 4xx but 404, 409, 429) refused for good?  The render is
 * deterministic, so a create the API server judged invalid (400, 422, 413, ...) is refused the
 * same way on every pass: the run ends FAILED WORKER_REFUSED (spec section 8) instead of holding
 * its node and GPUs until its deadline.  Not 401 or 403: an access an operator can grant (the
 * RoleBinding mlplat-lab-inputs, the credentials), after which the same create succeeds: the run
 * waits, blocked, and says why; nor 408, a timeout.
 */
static bool
create_refused_for_good(int status)
{
	return status >= 400 && status < 500 && status != 401 && status != 403 && status != 408;
}

/*
 * A create of a run's Secret or Job refused (a 4xx but 409): the run says why; *for_good when
 * no retry can help (create_refused_for_good).
 */
static char *
create_refused(MlplatPass *pass, const LabRun *r, const char *name, int status, const char *error, bool *for_good)
{
	char *why = psprintf("the create of %s/%s was refused (HTTP %d): %s%s", r->namespace, name, status,
						 error ? error : "no reason given",
						 status == 403 ? "; mlplat needs RoleBinding mlplat-lab-inputs there" : "");

	*for_good = create_refused_for_good(status);
	snprintf(pass->status, sizeof(pass->status), "lab run %lld %s: %s", (long long) r->id,
			 *for_good ? "failed WORKER_REFUSED" : "blocked", why);
	return why;
}

/* What a pass records of its writes' answers: spans, the notes they settle, ledger rows. */
typedef struct LabAnswers
{
	MlplatPass *pass;
	MlJsonArena *arena;
	const char *instance;
	List *spans;
	MlplatWriteNotes settled;
	List *ledger;
	int writes;
} LabAnswers;

/*
 * Record the answer to one write of r, to its Secret or its Job (res, name,
 * the render's content id cid): its span, the write note it settles, its
 * ledger row; a create refused for good blocks the run (create_refused).  A 409
 * on a create is settled by verify_conflict.  Returns the outcome: OK, RETRY,
 * FAILED, or for a 409 ADOPTED or the conflict's.
 */
static const char *
write_answered(LabAnswers *a, LabRun *r, const MlplatKubeResource *res, LabWrite w, const MlplatHttpRequest *req,
			   const char *name, const char *cid)
{
	char *object = mlplat_object_path(r->namespace, name);
	int status;
	char *error;
	const char *outcome;

	a->writes++;
	outcome = write_outcome(req, w, &status, &error);
	request_span(&a->spans, r, w == LAB_WRITE_CREATE ? "create" : "delete", name, req,
				 strcmp(outcome, "OK") == 0 || strcmp(outcome, "EXISTS") == 0 ? NULL : error);
	if (status >= 200 && status < 500)
		mlplat_write_notes_answered(&a->settled, r->id, object, NULL, w == LAB_WRITE_CREATE && mlplat_write_made(status));
	if (strcmp(outcome, "EXISTS") != 0)
	{
		ledger_add(&a->ledger, r, write_action(w), outcome, status, error, object);
		if (w == LAB_WRITE_CREATE && strcmp(outcome, "FAILED") == 0)
		{
			bool for_good;
			char *why = create_refused(a->pass, r, name, status, error, &for_good);

			if (for_good)
				r->refused_by = why;
			else
				r->blocked_by = why;
		}
		return outcome;
	}
	outcome = verify_conflict(a->arena, res, r, name, cid, a->instance);
	if (strcmp(outcome, "ADOPTED") == 0)
		ledger_add(&a->ledger, r, "ADOPT", "OK", status, NULL, object);
	else
		ledger_add(&a->ledger, r, "ADOPT", outcome, status, r->conflict, object);
	return outcome;
}

/* Read the completed attempts' outputs, in one follow-up round: a bounded GET of each (max_output_bytes + 1). */
static MlplatObservedObject *
output_ask(MlplatPassWork *w, void *row, MlplatHttpBatch *batch)
{
	LabRun *r = row;
	MlplatHttpRequest *get;
	char *why;

	if (!r->read_output)
		return NULL;
	get = mlplat_s3_object_request(batch, r->output_uri, "GET", &why);
	if (get == NULL)
	{
		/* no usable store: nothing can be ingested; look again later */
		snprintf(w->pass->status, sizeof(w->pass->status), "lab output not read: %s", why);
		return NULL;
	}
	get->max_body = (size_t) r->max_output_bytes + 1;
	mlplat_observe_peer(&r->output_seen, get, &mlplat_object_store_peer);
	return &r->output_seen;
}

static void
output_answer(MlplatPassWork *w, void *row, const MlplatObservedObject *seen)
{
	LabRun *r = row;

	if (seen->too_large)
		r->event = "OUTPUT_TOO_LARGE";
	else if (seen->state == MLPLAT_OBSERVED_ERROR && !seen->permanent)
		w->pass->next_pass_ms = 1000; /* transient: read it again */
	else if (seen->state == MLPLAT_OBSERVED_FOUND)
	{
		r->event = "COMPLETED";
		r->output = pnstrdup(seen->get->resp_body, seen->get->resp_len);
		r->delete_output = true;
	}
	else
		r->event = "COMPLETED"; /* gone (OUTPUT_MISSING), refused or not JSON: nothing usable was written */
}

/*
 * Must this pass LIST the lab Nodes?  The Node evidence the claim assesses must be fresh
 * (mlplat.lab_node_max_age), so: on every resync, when half the max age has gone by since
 * this leader's last LIST, and when the claim may take a lease (a QUEUED run on a node whose
 * lease is free: it must not dispatch on evidence a LIST could have refuted).  Other woken
 * and follow-up passes (cancels, Jobs that move) leave the Nodes alone.
 */
static TimestampTz nodes_listed_at = 0;

static bool
nodes_due(MlplatPass *pass)
{
	bool need = false;

	if (pass->resync || nodes_listed_at == 0 ||
		TimestampDifferenceExceeds(nodes_listed_at, GetCurrentTimestamp(), mlplat_lab_node_max_age_s * 500))
		return true;
	mlplat_txn_begin();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "mlplat: SPI_connect failed");
	if (SPI_execute("SELECT EXISTS (SELECT 1 FROM mlplat.lab_runs x WHERE x.status = 'QUEUED' AND NOT EXISTS "
					"(SELECT 1 FROM mlplat.lab_leases l WHERE l.node_id = x.node_id))",
					true, 1) == SPI_OK_SELECT &&
		SPI_processed == 1)
	{
		bool isnull;
		Datum d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

		need = !isnull && DatumGetBool(d);
	}
	SPI_finish();
	mlplat_txn_commit();
	return need;
}

/*
 * Which of objs (Jobs and Secrets found by a LIST) are this installation's render of the run
 * their name names (lab-<id>-<attempt>, lab-<id>-input) in that run's namespace?  The database
 * renders the Job of that attempt again (the Secret's content id is the run's input digest)
 * and compares the content id the object carries: a run row gone, or another id, is not
 * known, and such an object is never deleted (issue 18, finding 5; as deployments.c does
 * with an orphan whose id no revision has).  One short transaction, none may be open.
 */
static bool *
lab_objects_known(List *objs)
{
	int n = list_length(objs);
	const char **cells = palloc(sizeof(char *) * 3 * Max(n, 1));
	int k = 0;
	ListCell *lc;

	foreach (lc, objs)
	{
		const MlJsonValue *o = lfirst(lc);

		cells[k++] = mlplat_json_text(o, "metadata", "namespace", NULL);
		cells[k++] = mlplat_json_text(o, "metadata", "name", NULL);
		cells[k++] = mlplat_object_content_id(o);
	}
	return mlplat_sql_known_ordinals(
		"SELECT a.ord::pg_catalog.int4 "
		"FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.text[]), pg_catalog.unnest($2::pg_catalog.text[]), "
		"  pg_catalog.unnest($3::pg_catalog.text[])) WITH ORDINALITY a(ns, name, cid, ord) "
		"JOIN mlplat.lab_runs x ON a.name ~ '^lab-[0-9]{1,18}-([0-9]{1,9}|input)$' "
		"  AND x.id = pg_catalog.substring(a.name, '^lab-([0-9]+)-')::pg_catalog.int8 "
		"JOIN mlplat.projects p ON p.id = x.project_id "
		"WHERE a.ns = mlplat._project_namespace(p.name) AND a.cid = CASE "
		"  WHEN a.name = pg_catalog.format('lab-%s-input', x.id) THEN coalesce(x.input_digest, "
		"    pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to('[]', 'UTF8')), 'hex')) "
		"  ELSE mlplat._render_lab_job(pg_catalog.jsonb_populate_record(x, pg_catalog.jsonb_build_object('attempt', "
		"      pg_catalog.substring(a.name, '-([0-9]+)$')::pg_catalog.int4)), p.name, "
		"      (SELECT i.instance_id FROM mlplat.installation i), "
		"      coalesce(pg_catalog.current_setting('mlplat.lab_payload_bucket', true), '')) "
		"    #>> '{metadata,annotations,mlplat.io/content-id}' END",
		3, n, cells);
}

typedef struct LabOrphan
{
	const MlplatKubeResource *res;
	const char *ns;
	const char *name;
	const char *project;
	int64 lab_run_id;
	const MlJsonValue *obj;
	char *not_ours; /* why it is not deleted (a look-alike), or NULL */
	MlplatHttpRequest *req;
} LabOrphan;

/*
 * On a resync: the lab Jobs and Secrets of this installation that no claimed run owns (not
 * its current Job, not its input Secret) and that are not already going away.  The claim
 * returns every run that may still own an object (in flight, cancel requested after a
 * dispatch, a failed attempt not yet seen gone, or holding a lease), so anything else is
 * left over: a Secret whose delete was lost, a Job of an attempt long settled, a run purged.
 */
static List *
find_orphans(List *runs, List *objs, const MlplatKubeResource *res, bool is_job, const char *instance)
{
	List *out = NIL;
	ListCell *lc;

	foreach (lc, objs)
	{
		const MlJsonValue *o = lfirst(lc);
		const char *ns = mlplat_json_text(o, "metadata", "namespace", NULL);
		const char *name = mlplat_json_text(o, "metadata", "name", NULL);
		const char *run = mlplat_json_text(o, "metadata", "labels", "mlplat.io/lab-run");
		bool owned = false;
		ListCell *lc2;
		LabOrphan *orphan;

		if (ns == NULL || name == NULL || !mlplat_labelled_ours(o, instance, LAB_COMPONENT) ||
			mlplat_json_text(o, "metadata", "deletionTimestamp", NULL))
			continue;
		foreach (lc2, runs)
		{
			LabRun *r = lfirst(lc2);

			owned |= mlplat_str_same(r->namespace, ns) && mlplat_str_same(is_job ? r->job_name : r->secret_name, name);
		}
		if (owned)
			continue;
		orphan = palloc0(sizeof(LabOrphan));
		orphan->res = res;
		orphan->ns = ns;
		orphan->name = name;
		orphan->project = mlplat_json_text(o, "metadata", "labels", MLPLAT_LABEL_PROJECT);
		orphan->lab_run_id = run ? strtoll(run, NULL, 10) : 0;
		orphan->obj = o;
		out = lappend(out, orphan);
	}
	return out;
}

/*
 * Before anything found is deleted: an ending run's Job and Secret (their content id is then
 * not in the claim, which renders only while DISPATCHED) and every orphan are judged by the
 * database (lab_objects_known).  A run's object it knows gets its own id as the run's, so
 * lab_decide takes it; anything else is a look-alike, and an orphan one is not deleted.
 */
static void
judge_objects(List *runs, List *orphans, const char *instance)
{
	List *objs = NIL;
	List *cids = NIL; /* where each answer goes: a run's job_cid or secret_cid, NULL for an orphan */
	bool *known;
	ListCell *lc;
	int i = 0;

	foreach (lc, runs)
	{
		LabRun *r = lfirst(lc);

		if (r->unobserved || r->status == MLPLAT_LAB_RUN_DISPATCHED || !lab_may_delete(r))
			continue;
		if (r->job_obj)
		{
			objs = lappend(objs, (void *) r->job_obj);
			cids = lappend(cids, &r->job_cid);
		}
		if (r->secret_obj)
		{
			objs = lappend(objs, (void *) r->secret_obj);
			cids = lappend(cids, &r->secret_cid);
		}
	}
	foreach (lc, orphans)
	{
		objs = lappend(objs, (void *) ((LabOrphan *) lfirst(lc))->obj);
		cids = lappend(cids, NULL);
	}
	if (objs == NIL)
		return;
	known = lab_objects_known(objs);
	foreach (lc, objs)
	{
		const MlJsonValue *o = lfirst(lc);
		const char **cid = list_nth(cids, i);
		const char *got = mlplat_object_content_id(o);

		if (cid)
			*cid = known[i] ? got : NULL;
		else if (!known[i])
		{
			LabOrphan *orphan = list_nth(orphans, i - (list_length(objs) - list_length(orphans)));

			orphan->not_ours = psprintf("not torn down: %s (or no lab run of it is recorded)", not_ours(o, instance, NULL));
		}
		i++;
	}
}

/*
 * The write-back event of a run whose Job did not move: REFUSED when the create of its Secret
 * or Job was refused for good (the run ends FAILED WORKER_REFUSED); CREATED when this
 * attempt's Job is known to exist (a create answered, a 409 adopted, or seen by the LIST) and
 * no write-back has recorded it yet; BLOCKED when a request it needs was refused; UNBLOCKED
 * when a run that said it was blocked is no longer.  Past the run deadline the claim's reason
 * stands.
 */
static void
settle_created_blocked(LabRun *r)
{
	if (r->event != NULL || r->conflict != NULL || r->finished || r->status == MLPLAT_LAB_RUN_RETRY_WAIT)
		return; /* (the write-back takes these events for DISPATCHED, RUNNING, CANCEL_REQUESTED) */
	if (r->refused_by != NULL && r->status == MLPLAT_LAB_RUN_DISPATCHED)
	{
		r->event = "REFUSED";
		r->observation = mlplat_json_object("refused", r->refused_by, NULL);
	}
	else if (r->status == MLPLAT_LAB_RUN_DISPATCHED && !r->job_created && (r->job_made || r->job_obj != NULL))
	{
		r->event = "CREATED";
		r->observation = observation_json(r, r->job_made ? "created" : "seen");
	}
	else if (r->blocked_by != NULL && !r->past_deadline)
	{
		r->event = "BLOCKED";
		r->observation = mlplat_json_object("blocked", r->blocked_by, NULL);
	}
	else if (r->blocked && r->blocked_by == NULL)
		r->event = "UNBLOCKED";
}

/*
 * The write-back row of r, when it has an event to record (and the notes it
 * settles, the ledger rows of its adoptions and conflicts).
 */
static bool
lab_row(MlplatWriteback *wb, void *entity, void *row)
{
	LabRun *r = entity;
	LabWriteback *w = row;

	if (r->event == NULL && r->conflict && !r->finished)
	{
		/* nothing moved, but the run says why it waits (status_reason) */
		r->event = "CONFLICT";
		r->observation = mlplat_json_object("conflict", r->conflict, NULL);
	}
	if (r->event != NULL)
	{
		w->controller = wb->pass->controller;
		w->event = r->event;
		w->observation = r->observation ? r->observation : observation_json(r, NULL);
		w->output = r->output;
		if (r->job_name && r->job_note && r->job_obj == NULL)
			mlplat_writeback_settle(wb, r->id, mlplat_object_path(r->namespace, r->job_name), true, NULL);
	}

	/*
	 * an adopted Job or Secret answers its create's note: adopted once, not again every
	 * pass (a delete sent in the same pass keeps its own note)
	 */
	if (r->adopt_job)
		mlplat_writeback_settle(wb, r->id, mlplat_object_path(r->namespace, r->job_name), false, r->job_note->action);
	if (r->settle_secret_note)
		mlplat_writeback_settle(wb, r->id, mlplat_object_path(r->namespace, r->secret_name), false,
								r->secret_note->action);
	if (r->adopt_secret)
		mlplat_ledger_batch_add(wb->ledger, "lab_run", r->id, r->project, "ADOPT", "OK", NULL, NULL, 0, NULL,
								mlplat_trace_id_of(r->traceparent), mlplat_object_path(r->namespace, r->secret_name));
	if (r->adopt_job)
		mlplat_ledger_batch_add(wb->ledger, "lab_run", r->id, r->project, "ADOPT", "OK", NULL, NULL, 0, NULL,
								mlplat_trace_id_of(r->traceparent), mlplat_object_path(r->namespace, r->job_name));
	if (r->conflict_action)
		mlplat_ledger_batch_add(wb->ledger, "lab_run", r->id, r->project, r->conflict_action, "CONFLICT", NULL, NULL, 0,
								r->conflict, mlplat_trace_id_of(r->traceparent),
								mlplat_object_path(r->namespace, r->conflict_object ? r->conflict_object : r->job_name));
	return r->event != NULL;
}

/* a row the write-back did not take: its output was not ingested, so it is read again next pass */
static void
lab_done(MlplatWriteback *wb, void *entity, bool held)
{
	LabRun *r = entity;

	if (!held)
		r->delete_output = false;
}

/* The ledger rows of the orphans' teardowns, before the runs' own (as they are sent). */
static void
orphans_answered(LabAnswers *a, List *orphans)
{
	List *rows = NIL;
	ListCell *lc;

	foreach (lc, orphans)
	{
		LabOrphan *o = lfirst(lc);
		int status = 0;
		char *error = o->not_ours;
		const char *outcome = "CONFLICT"; /* mlplat's labels, but not provably this installation's: not deleted */

		if (o->not_ours == NULL)
		{
			outcome = write_outcome(o->req, LAB_WRITE_DELETE, &status, &error);
			a->writes++;
			if (strcmp(outcome, "OK") == 0)
				error = NULL;
		}
		mlplat_ledger_row_add(&rows, o->lab_run_id, o->project, "ORPHAN_TEARDOWN", outcome, status, error, NULL,
							  mlplat_object_path(o->ns, o->name));
	}
	a->ledger = list_concat(rows, a->ledger);
}

/*
 * Send each run's write of res (its Secret or its Job) and the orphans'
 * deletes in batch, and record the answers.  An object is made when its create
 * answered 2xx or its 409 adopted; a Job is not sent over a Secret that was
 * not made (the Job waits for its input: no Job without it).  Orphans are not
 * noted: a DELETE is idempotent and the next resync repeats a lost one; a Job
 * goes in the foreground, so its Pods go first.
 */
static void
write_side(LabAnswers *a, MlplatHttpBatch *batch, List *runs, List *orphans, const MlplatKubeResource *res)
{
	LabSide *sides = palloc(sizeof(LabSide) * Max(list_length(runs), 1));
	int n = 0;
	ListCell *lc;

	foreach (lc, runs)
	{
		LabSide *d = &sides[n++];

		*d = side_of(lfirst(lc), res);
		*d->req = send_write(batch, res, *d->write, d->run->namespace, d->name, d->render);
	}
	foreach (lc, orphans)
	{
		LabOrphan *o = lfirst(lc);

		if (o->not_ours == NULL)
			o->req = send_write(batch, o->res, o->res == &JOB ? LAB_WRITE_DELETE_FOREGROUND : LAB_WRITE_DELETE, o->ns,
								o->name, NULL);
	}
	mlplat_http_batch_run(batch);
	for (int i = 0; i < n; i++)
	{
		LabSide *d = &sides[i];
		const char *outcome;
		bool made;

		if (*d->req == NULL)
			continue;
		outcome = write_answered(a, d->run, res, *d->write, *d->req, d->name, d->cid);
		made = strcmp(outcome, "ADOPTED") == 0 || (*d->write == LAB_WRITE_CREATE && strcmp(outcome, "OK") == 0);
		if (res == &JOB)
			d->run->job_made = made;
		else if (*d->write == LAB_WRITE_CREATE && !made)
			d->run->job_write = LAB_WRITE_NONE;
	}
	pfree(sides);
}

void
mlplat_lab_runs_pass(MlplatPass *pass)
{
	MlplatPassWork w;
	List *runs = NIL;
	List *nodes = NIL;
	List *jobs;
	List *secrets = NIL;
	List *lab_namespaces = NIL;
	List *unobserved = NIL;
	List *unobserved_why = NIL;
	LabAnswers answers = { 0 };
	MlplatHttpBatch *job_batch;
	ListCell *lc;

	mlplat_pass_work_begin(&w, pass);

	/* 1. the lab nodes, before the claim assesses them (when due or needed) */
	if (nodes_due(pass))
	{
		TimestampTz started = GetCurrentTimestamp();

		nodes = mlplat_pass_work_list(&w, &NODE, "mlplat.io/lab=true");
		nodes_listed_at = started;
	}

	/* 2. claim */
	claim(&w, w.lists > 0, nodes, &runs, &lab_namespaces);
	answers.pass = pass;
	answers.arena = w.arena;
	answers.instance = w.instance;
	if (runs == NIL && !pass->resync)
	{
		snprintf(pass->status, sizeof(pass->status), "%d lab nodes observed; no lab runs in flight",
				 list_length(nodes));
		return;
	}

	/* 3. observe the worker's Jobs and Secrets */
	jobs = mlplat_pass_work_list(&w, &JOB, NULL);
	list_secrets(w.arena, runs, jobs, lab_namespaces, w.selector, &secrets, &unobserved, &unobserved_why, &w.lists);
	if (unobserved != NIL)
		snprintf(pass->status, sizeof(pass->status), "%s%s", (char *) llast(unobserved_why),
				 list_length(unobserved) > 1 ? psprintf(" (and %d more namespaces)", list_length(unobserved) - 1) : "");
	if (pass->resync)
		w.orphans = list_concat(find_orphans(runs, jobs, &JOB, true, w.instance),
								find_orphans(runs, secrets, &SECRET, false, w.instance));

	/* 4. decide, note, send: Secrets first, then the Jobs that mount them */
	/* w.batch sends the Secrets */
	job_batch = mlplat_http_batch_create(w.cxt);
	foreach (lc, runs)
	{
		LabRun *r = lfirst(lc);

		if (ns_listed(unobserved, r->namespace))
		{
			/* its Secrets could not be listed: nothing is decided blind; it says why, looks again */
			r->unobserved = r->waiting = true;
			r->blocked_by = list_nth(unobserved_why, ns_position(unobserved, r->namespace));
			pass->next_pass_ms = 1000;
			continue;
		}
		r->job_obj = mlplat_observed_find(jobs, r->namespace, r->job_name);
		r->secret_obj = mlplat_observed_find(secrets, r->namespace, r->secret_name);
		r->job_cid = render_cid(w.arena, r->job);
		r->secret_cid = render_cid(w.arena, r->secret);
	}
	judge_objects(runs, w.orphans, w.instance);
	foreach (lc, runs)
	{
		LabRun *r = lfirst(lc);

		if (r->unobserved)
			continue;
		lab_decide(r, w.instance);
		if (r->secret_write == LAB_WRITE_CREATE && r->secret == NULL)
			r->secret_write = LAB_WRITE_NONE;
		if (r->job_write == LAB_WRITE_CREATE && r->job == NULL)
			r->job_write = LAB_WRITE_NONE;
		secret_note_decide(r, w.instance);
		if (r->secret_write != LAB_WRITE_NONE)
			mlplat_write_notes_add(&w.sending, r->id, mlplat_object_path(r->namespace, r->secret_name),
								   write_action(r->secret_write));
		if (r->job_write != LAB_WRITE_NONE)
			mlplat_write_notes_add(&w.sending, r->id, mlplat_object_path(r->namespace, r->job_name),
								   write_action(r->job_write));
		if (r->waiting || r->job_write != LAB_WRITE_NONE || r->status == MLPLAT_LAB_RUN_RUNNING ||
			r->status == MLPLAT_LAB_RUN_DISPATCHED)
			pass->next_pass_ms = FOLLOW_UP_MS;
	}
	if (!mlplat_pass_work_notes_commit(&w, "requests"))
		return;
	/* the Secrets first, then the Jobs that mount them; orphans go with the Secrets */
	write_side(&answers, w.batch, runs, w.orphans, &SECRET);
	write_side(&answers, job_batch, runs, NIL, &JOB);
	orphans_answered(&answers, w.orphans);
	foreach (lc, runs)
		settle_created_blocked(lfirst(lc));

	/* 5. outputs of completed attempts */
	mlplat_pass_work_follow_up(&w, runs, output_ask, output_answer);
	foreach (lc, runs)
	{
		LabRun *r = lfirst(lc);

		const MlplatHttpRequest *g = r->output_seen.get;

		if (g)
			request_span(&answers.spans, r, "output_read", NULL, g,
						 g->failed ? g->error : g->status >= 500 ? "the object store failed the read"
																 : NULL);
	}

	/* 6. write back (with the notes, spans and ledger rows of the answers above) */
	{
		MlplatWriteback wb;

		mlplat_writeback_begin(&wb, pass, &writeback_seam, &claim_seam);
		wb.settled = answers.settled;
		wb.spans = answers.spans;
		mlplat_writeback_rows(&wb, runs, lab_row, "SELECT * FROM mlplat._lab_runs_writeback_set($1, $2)", lab_done);
		mlplat_ledger_batch_add_rows(wb.ledger, "lab_run", answers.ledger);
		mlplat_writeback_end(&wb);
	}

	/* the ingested outputs leave the store (best effort; a left object is overwritten by nothing) */
	{
		MlplatHttpBatch *del = mlplat_http_batch_create(w.cxt);
		List *deleted = NIL;

		foreach (lc, runs)
		{
			LabRun *r = lfirst(lc);
			char *w;

			if (r->delete_output && (r->delete_req = mlplat_s3_object_request(del, r->output_uri, "DELETE", &w)) != NULL)
				deleted = lappend(deleted, r);
		}
		if (deleted != NIL)
		{
			MlplatLedgerBatch *ledger;

			mlplat_http_batch_run(del);
			mlplat_txn_begin();
			ledger = mlplat_ledger_batch_new();
			foreach (lc, deleted)
			{
				LabRun *r = lfirst(lc);

				MlplatHttpRequest *d = r->delete_req;
				bool ok = !d->failed && ((d->status >= 200 && d->status < 300) || d->status == 404);
				List *one = NIL;

				request_span(&one, r, "output_delete", NULL, d, ok ? NULL : "object store refused the delete");
				mlplat_spans_flush(one);

				mlplat_ledger_batch_add(ledger, "lab_run", r->id, r->project, "DELETE", ok ? "OK" : "RETRY", NULL, NULL,
										d->status, ok ? NULL : (d->failed ? d->error : "object store refused the delete"),
										mlplat_trace_id_of(r->traceparent), r->output_uri);
			}
			(void) mlplat_ledger_batch_flush(pass, ledger);
			mlplat_txn_commit();
			MemoryContextSwitchTo(w.cxt);
		}
	}
	w.writes = answers.writes;
	mlplat_pass_work_status(&w, NULL, "%d lab nodes, %d lab runs in flight", list_length(nodes), list_length(runs));
}
