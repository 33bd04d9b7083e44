/*
 * campaigns.c — the campaigns reconciler: optimization candidates as builder Jobs
 * (docs/campaigns.md; issue 14).
 *
 * One pass:
 *   1. claim (mlplat._campaigns_claim, a short transaction committed before anything is
 *      sent): admission of PLANNED candidates happens there, in SQL; the pass gets every
 *      BUILDING/CANCEL_REQUESTED candidate with its render, and every terminal one whose
 *      Job still has to be removed;
 *   2. observe: one paginated LIST of Jobs carrying our managed-by and instance labels and
 *      app.kubernetes.io/component=optimization-builder — never one GET per candidate;
 *   3. decide per candidate (pure: cand_decide) and send one concurrent batch, every
 *      request noted first in mlplat.unanswered_writes: POST the Job (409: adopt only
 *      when labels, image and content id equal the render's, else a conflict); DELETE
 *      it with propagationPolicy=Foreground on cancel or at the approval's expiry (the
 *      candidate ends only once the Job is seen gone, so no Pod outlives it); DELETE it
 *      (Background) once a terminal candidate's outcome is written; for a Complete Job
 *      GET the attestation (at most 64 kB) and verify the attested output digest with
 *      the artifact module (the store's checksum, the digest cache or a bounded hash —
 *      never a digest the builder wrote itself);
 *   4. write back (mlplat._campaigns_writeback_set: CAS on row_version and the leader's
 *      epoch; BUILT inserts the optimized artifact in the same transaction) with a ledger
 *      row per external write and per verification, even when the CAS lost.
 * A candidate whose create was answered and whose Job is no longer listed is FAILED
 * JOB_DISAPPEARED, never resubmitted.  On a resync a builder Job of ours that belongs to
 * no claimed candidate is deleted (ORPHAN_TEARDOWN).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "mlplat/artifact.h"
#include "mlplat/backoff.h"
#include "mlplat/canonical.h"
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

static const MlplatKubeResource JOB = { "batch", "v1", "jobs", true };

#define COMPONENT "optimization-builder"
#define CANDIDATE_CID "mlplat.io/candidate-content-id"
#define ATTESTATION_MAX (64 * 1024)
/* how soon to look again while a Job moves */
#define FOLLOW_UP_MS 300

typedef enum CandAction
{
	CAND_NONE = 0,
	CAND_CREATE,  /* POST the Job */
	CAND_STOP,	  /* DELETE, Foreground: cancel or expiry */
	CAND_CLEANUP, /* DELETE, Background: a terminal candidate's Job */
	CAND_VERIFY	  /* Complete: attestation GET, then the output check */
} CandAction;

typedef struct Cand
{
	/* claimed: the attributes of mlplat.campaign_claim */
	MLPLAT_SEAM_MEMBERS(campaign_claim)
	/* derived */
	const MlplatUnanswered *unanswered;
	const char *instance;
	const MlJsonValue *render;
	const MlJsonValue *obj;		 /* the Job, as listed */
	MlplatObservedObject holder; /* after a 409: what holds the Job's name */
	/* decided */
	CandAction action;
	MlplatHttpRequest *req;
	MlplatArtifactCheck *fetch;		/* the attestation */
	MlplatArtifactCheck *verify;	/* the output */
	MlplatArtifactCheck *rm_output; /* cleanup of a candidate that is not BUILT: its partial outputs */
	MlplatArtifactCheck *rm_attestation;
	const char *attested_sha256;
	int64 attested_bytes;
	char attestation_sha256[ML_CONTENT_ID_LEN + 1];
	const MlJsonValue *attestation;
	int new_status; /* an MlplatCampaignCandidateStatus, or MLPLAT_NO_STATUS: no move */
	const char *reason_code;
	char *status_reason;
	TimestampTz started_at;
	int64 actual_gpu_seconds; /* -1: not known yet */
	bool mark_created;
	bool adopt;
	bool settle_note;
	bool answered; /* this pass's request was answered: remove its own note */
	bool waiting;
	bool cleanup_done;
	bool write;
	const char *ledger_action;
	const char *ledger_outcome;
	char *ledger_error;
	int http_status;
	int32 retry_ms; /* -1: backoff unchanged; 0: reset (a request succeeded); > 0: failed, retry then */
	MlplatSpan *span;
	MlplatSpan *vspan; /* campaigns.verify: the attestation read and the output check */
} Cand;

/* ---------------------------------------------------------------- pure helpers */

/* An RFC 3339 time as Kubernetes writes it ("2026-12-02T05:47:17Z"), or 0. */
static TimestampTz
k8s_time(const char *s)
{
	int y, mo, d, h, mi, sec;
	char z;

	if (s == NULL || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%c", &y, &mo, &d, &h, &mi, &sec, &z) != 7 || z != 'Z')
		return 0;
	return DatumGetTimestampTz(DirectFunctionCall3(timestamptz_in, CStringGetDatum(s),
												   ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1)));
}

/* The condition of type t with status True, or NULL. */
static const MlJsonValue *
job_condition(const MlJsonValue *job, const char *t)
{
	const MlJsonValue *conds = ml_json_object_get(ml_json_object_get(job, "status"), "conditions");

	if (conds == NULL || conds->type != ML_JSON_ARRAY)
		return NULL;
	for (size_t i = 0; i < conds->u.array.count; i++)
	{
		const MlJsonValue *c = conds->u.array.items[i];

		if (mlplat_str_same(mlplat_json_text(c, "type", NULL, NULL), t) && mlplat_str_same(mlplat_json_text(c, "status", NULL, NULL), "True"))
			return c;
	}
	return NULL;
}

static const char *
job_image(const MlJsonValue *job)
{
	const MlJsonValue *cs = ml_json_object_get(ml_json_object_get(ml_json_object_get(ml_json_object_get(job, "spec"), "template"), "spec"), "containers");

	if (cs == NULL || cs->type != ML_JSON_ARRAY || cs->u.array.count != 1)
		return NULL;
	return mlplat_json_text(cs->u.array.items[0], "image", NULL, NULL);
}

/*
 * Is a Job found under this candidate's name the one its create made?  Our labels of
 * this installation, the component, the render's image and candidate content id.  NULL
 * if it is, else why not.
 */
static char *
not_ours(const Cand *c, const MlJsonValue *job)
{
	static const char *const keys[] = { MLPLAT_LABEL_MANAGED_BY, MLPLAT_LABEL_INSTANCE, MLPLAT_LABEL_COMPONENT,
										"mlplat.io/campaign", "mlplat.io/candidate" };

	if (c->render == NULL)
		return pstrdup("this candidate has no render to compare it with");
	for (int i = 0; i < lengthof(keys); i++)
	{
		const char *want = mlplat_json_text(c->render, "metadata", "labels", keys[i]);
		const char *got = mlplat_json_text(job, "metadata", "labels", keys[i]);

		if (want == NULL || !mlplat_str_same(want, got))
			return psprintf("its label %s is %s, the render's %s", keys[i], got ? got : "absent", want ? want : "absent");
	}
	if (job_image(c->render) == NULL || !mlplat_str_same(job_image(job), job_image(c->render)))
		return psprintf("its image is %s, the render's %s", job_image(job) ? job_image(job) : "absent",
						job_image(c->render) ? job_image(c->render) : "absent");
	if (mlplat_json_text(c->render, "metadata", "annotations", CANDIDATE_CID) == NULL ||
		!mlplat_str_same(mlplat_json_text(job, "metadata", "annotations", CANDIDATE_CID),
						 mlplat_json_text(c->render, "metadata", "annotations", CANDIDATE_CID)))
		return psprintf("its %s is not the render's", CANDIDATE_CID);
	return NULL;
}

/* gpus x whole seconds from start to finish; unknown start: the whole reservation (capped in SQL) */
static int64
spend(const Cand *c, TimestampTz start, TimestampTz finish)
{
	long secs;
	int usecs;

	if (start == 0)
		start = c->claimed_at; /* the Job started after the claim: an upper bound */
	if (start == 0 || finish == 0)
		return PG_INT64_MAX / 2;
	if (finish <= start)
		return 0;
	TimestampDifference(start, finish, &secs, &usecs);
	return (int64) c->gpus * (secs + (usecs > 0 ? 1 : 0));
}

static void
move(Cand *c, MlplatCampaignCandidateStatus status, const char *code, char *why)
{
	c->new_status = status;
	c->reason_code = code;
	c->status_reason = why;
	c->write = true;
}

/*
 * One failed attempt of a request for this candidate: the next one waits a bounded
 * exponential delay with jitter (the server's Retry-After raises it), persisted in the
 * candidate's attempts/next_attempt_at so that neither a wake nor a new leader sends it
 * earlier; at least floor_ms (what the artifact module asks for).
 */
static void
retry_later(Cand *c, MlplatPass *pass, bool permanent, int retry_after_s, int floor_ms)
{
	int64 ms = permanent ? mlplat_backoff_delay_ms(c->attempts + 1, 1000, Min(MLPLAT_PERMANENT_RETRY_MS, mlplat_backoff_max_ms), 0,
												   (uint64) c->id ^ (uint64) c->attempts)
						 : mlplat_backoff_delay_ms(c->attempts + 1, 500, mlplat_backoff_max_ms, retry_after_s,
												   (uint64) c->id ^ (uint64) c->attempts);

	c->retry_ms = (int32) Min(Max(ms, floor_ms), PG_INT32_MAX);
	c->write = true;
	/* come back when the retry is due, not only at the next resync */
	mlplat_pass_wake_within(pass, c->retry_ms);
}

/* Decide what one candidate needs, from the claim and the listed Job alone. */
static void
cand_decide(Cand *c, TimestampTz now)
{
	bool cancel = c->status == MLPLAT_CAMPAIGN_CANDIDATE_CANCEL_REQUESTED;
	bool expired = !cancel && c->expires_at != 0 && now >= c->expires_at;
	const MlJsonValue *done;
	const MlJsonValue *failed;

	c->new_status = MLPLAT_NO_STATUS;
	c->actual_gpu_seconds = -1;
	c->retry_ms = -1;
	if (c->cleanup)
	{
		/* terminal: its Job goes (404 counts as gone); after a failure, once due */
		if (!c->due)
			return;
		if (c->obj == NULL)
		{
			c->cleanup_done = true;
			c->write = true;
		}
		else if (mlplat_json_text(c->obj, "metadata", "deletionTimestamp", NULL) == NULL)
			c->action = CAND_CLEANUP;
		return;
	}
	if (c->obj == NULL)
	{
		if (!c->created && c->unanswered && !mlplat_unanswered_settled(c->unanswered))
		{
			/* a create was sent without an answer: the Job may still appear */
			c->waiting = true;
			return;
		}
		c->settle_note = c->unanswered != NULL;
		if (cancel)
			move(c, MLPLAT_CAMPAIGN_CANDIDATE_CANCELLED, NULL,
				 c->created ? psprintf("cancelled; Job %s/%s is gone", c->namespace, c->job_name)
							: pstrdup("cancelled before the builder Job was created"));
		else if (expired)
			move(c, MLPLAT_CAMPAIGN_CANDIDATE_FAILED, "APPROVAL_EXPIRED_WHILE_BUILDING",
				 c->created ? psprintf("the approval expired while building; Job %s/%s is gone", c->namespace, c->job_name)
							: pstrdup("the approval expired before the builder Job was created"));
		else if (c->created)
			move(c, MLPLAT_CAMPAIGN_CANDIDATE_FAILED, "JOB_DISAPPEARED",
				 psprintf("Job %s/%s disappeared outside mlplat; not resubmitted", c->namespace, c->job_name));
		else if (c->manifest && c->due)
			c->action = CAND_CREATE;
		if (c->new_status != MLPLAT_NO_STATUS && c->created)
			c->actual_gpu_seconds = spend(c, 0, now);
		else if (c->new_status != MLPLAT_NO_STATUS)
			c->actual_gpu_seconds = 0;
		return;
	}

	if (!c->created)
	{
		char *why = not_ours(c, c->obj);

		if (why)
		{
			c->status_reason = psprintf("Job %s/%s exists but is not this candidate's: %s; not adopted, not touched",
										c->namespace, c->job_name, why);
			c->ledger_action = "ADOPT";
			c->ledger_outcome = "CONFLICT";
			c->ledger_error = c->status_reason;
			c->write = true;
			if (cancel && !(c->unanswered && !mlplat_unanswered_settled(c->unanswered)))
			{
				/* the name is held by another Job: no create of this candidate made it */
				move(c, MLPLAT_CAMPAIGN_CANDIDATE_CANCELLED, NULL, psprintf("cancelled; %s", c->status_reason));
				c->settle_note = c->unanswered != NULL;
				c->actual_gpu_seconds = 0;
			}
			return;
		}
		c->adopt = true;
		c->mark_created = true;
		c->write = true;
	}
	if (c->unanswered && (mlplat_unanswered_seen_settles(c->unanswered) || mlplat_unanswered_settled(c->unanswered)))
	{
		c->settle_note = true;
		c->write = true;
	}
	c->started_at = k8s_time(mlplat_json_text(c->obj, "status", "startTime", NULL));
	done = job_condition(c->obj, "Complete");
	failed = job_condition(c->obj, "Failed");
	if (done)
	{
		if (c->due)
			c->action = CAND_VERIFY;
		c->actual_gpu_seconds = spend(c, c->started_at, k8s_time(mlplat_json_text(c->obj, "status", "completionTime", NULL)));
		return;
	}
	if (failed)
	{
		const char *r = mlplat_json_text(failed, "reason", NULL, NULL);
		const char *m = mlplat_json_text(failed, "message", NULL, NULL);

		move(c, MLPLAT_CAMPAIGN_CANDIDATE_FAILED, mlplat_str_same(r, "DeadlineExceeded") ? "BUILD_DEADLINE_EXCEEDED" : "BUILD_FAILED",
			 psprintf("Job %s/%s failed: %s%s%s", c->namespace, c->job_name, r ? r : "Failed", m ? ": " : "", m ? m : ""));
		c->actual_gpu_seconds = spend(c, c->started_at, k8s_time(mlplat_json_text(failed, "lastTransitionTime", NULL, NULL)));
		return;
	}
	if ((cancel || expired) && c->due && mlplat_json_text(c->obj, "metadata", "deletionTimestamp", NULL) == NULL)
		c->action = CAND_STOP;
}

/* ---------------------------------------------------------------- the attestation */

/* Is every field of expect equal in the attestation, and is its shape closed?  NULL, or why not. */
static char *
attestation_check(Cand *c, MlJsonArena *arena, const char *body, size_t len, const char **code)
{
	static const char *const free_fields[] = { "output_sha256", "output_bytes", "sbom_sha256", "started_at", "finished_at" };
	MlJsonError err;
	const MlJsonValue *a = ml_json_parse(arena, body, len, NULL, &err);
	const MlJsonValue *e = ml_json_parse(arena, c->expect, strlen(c->expect), NULL, &err);
	const MlJsonValue *v;

	*code = "ATTESTATION_INVALID";
	if (e == NULL || e->type != ML_JSON_OBJECT)
		return pstrdup("the plan's expected attestation could not be read");
	if (a == NULL || a->type != ML_JSON_OBJECT)
		return pstrdup("the attestation is not a JSON object");
	for (size_t i = 0; i < a->u.object.count; i++)
	{
		const char *k = a->u.object.members[i].key;
		bool known = ml_json_object_get(e, k) != NULL;

		for (int j = 0; !known && j < lengthof(free_fields); j++)
			known = strcmp(k, free_fields[j]) == 0;
		if (!known)
			return psprintf("the attestation has an unknown field %s", k);
	}
	v = ml_json_object_get(a, "output_sha256");
	if (v == NULL || v->type != ML_JSON_STRING || v->u.string.len != 64 ||
		strspn(v->u.string.str, "0123456789abcdef") != 64)
		return pstrdup("attestation field output_sha256 is not 64 lower-case hex digits");
	c->attested_sha256 = v->u.string.str;
	v = ml_json_object_get(a, "output_bytes");
	if (v == NULL || v->type != ML_JSON_NUMBER || !v->u.number.is_integer || v->u.number.value < 0)
		return pstrdup("attestation field output_bytes is not a non-negative integer");
	c->attested_bytes = (int64) v->u.number.value;
	v = ml_json_object_get(a, "sbom_sha256");
	if (v && v->type != ML_JSON_NULL &&
		(v->type != ML_JSON_STRING || v->u.string.len != 64 || strspn(v->u.string.str, "0123456789abcdef") != 64))
		return pstrdup("attestation field sbom_sha256 is neither null nor 64 lower-case hex digits");
	{
		/* the build's times (Unix seconds) are the builder's word, recorded, never trusted for
		 * spend; but a record that cannot be a time is not an attestation */
		const MlJsonValue *t0 = ml_json_object_get(a, "started_at");
		const MlJsonValue *t1 = ml_json_object_get(a, "finished_at");

		if (t0 && t0->type != ML_JSON_NULL && (t0->type != ML_JSON_NUMBER || !t0->u.number.is_integer || t0->u.number.value < 0))
			return pstrdup("attestation field started_at is neither null nor a non-negative integer (Unix seconds)");
		if (t1 && t1->type != ML_JSON_NULL && (t1->type != ML_JSON_NUMBER || !t1->u.number.is_integer || t1->u.number.value < 0))
			return pstrdup("attestation field finished_at is neither null nor a non-negative integer (Unix seconds)");
		if (t0 && t1 && t0->type == ML_JSON_NUMBER && t1->type == ML_JSON_NUMBER && t1->u.number.value < t0->u.number.value)
			return pstrdup("attestation field finished_at is before started_at");
	}
	*code = "ATTESTATION_MISMATCH";
	for (size_t i = 0; i < e->u.object.count; i++)
	{
		const char *k = e->u.object.members[i].key;
		const MlJsonValue *want = e->u.object.members[i].value;
		const MlJsonValue *got = ml_json_object_get(a, k);

		if (want->type == ML_JSON_OBJECT)
		{
			for (size_t j = 0; j < want->u.object.count; j++)
			{
				const char *k2 = want->u.object.members[j].key;
				const MlJsonValue *w2 = want->u.object.members[j].value;
				const MlJsonValue *g2 = ml_json_object_get(got, k2);

				if (got == NULL || got->type != ML_JSON_OBJECT || got->u.object.count != want->u.object.count)
					return psprintf("attestation field %s is not the plan's", k);
				if (g2 == NULL || g2->type != ML_JSON_STRING || w2->type != ML_JSON_STRING ||
					strcmp(g2->u.string.str, w2->u.string.str) != 0)
					return psprintf("attestation field %s.%s is \"%s\"; the plan says \"%s\"", k, k2,
									g2 && g2->type == ML_JSON_STRING ? g2->u.string.str : "(absent)",
									w2->type == ML_JSON_STRING ? w2->u.string.str : "");
			}
			continue;
		}
		if (got == NULL || got->type != ML_JSON_STRING || want->type != ML_JSON_STRING ||
			strcmp(got->u.string.str, want->u.string.str) != 0)
			return psprintf("attestation field %s is \"%s\"; the plan says \"%s\"", k,
							got && got->type == ML_JSON_STRING ? got->u.string.str : "(absent)",
							want->type == ML_JSON_STRING ? want->u.string.str : "");
	}
	c->attestation = a;
	return NULL;
}

/* End the campaigns.verify span with the verdict (NULL: verified). */
static void
verify_span_end(Cand *c, const char *error)
{
	if (c->vspan == NULL || c->vspan->end != 0)
		return;
	if (c->attested_sha256)
		mlplat_span_attr_text(c->vspan, "mlplat.attested_sha256", c->attested_sha256);
	if (c->verify && c->verify->got_sha256)
		mlplat_span_attr_text(c->vspan, "mlplat.output_sha256", c->verify->got_sha256);
	if (c->verify && c->verify->source)
		mlplat_span_attr_text(c->vspan, "mlplat.verified_by", c->verify->source);
	if (c->reason_code)
		mlplat_span_attr_text(c->vspan, "mlplat.reason_code", c->reason_code);
	mlplat_span_end(c->vspan, error);
}

/* After the attestation GET: a verdict, or an output check to run. */
static void
after_attestation(Cand *c, MlJsonArena *arena, MlplatPass *pass)
{
	MlplatArtifactCheck *f = c->fetch;
	const char *code;
	char *why;

	switch (f->verdict)
	{
		case MLPLAT_ARTIFACT_OK:
			break;
		case MLPLAT_ARTIFACT_FAILED:
			if (f->http_status == 404)
				move(c, MLPLAT_CAMPAIGN_CANDIDATE_FAILED, "ATTESTATION_MISSING", psprintf("the attestation %s is missing", c->attestation_uri));
			else
				move(c, MLPLAT_CAMPAIGN_CANDIDATE_FAILED, "ATTESTATION_INVALID", psprintf("the attestation could not be read: %s", f->reason));
			verify_span_end(c, c->status_reason);
			return;
		default:
			c->status_reason = psprintf("waiting to read the attestation: %s", f->reason);
			retry_later(c, pass, false, 0, f->retry_ms);
			verify_span_end(c, c->status_reason);
			return;
	}
	ml_sha256_hex(f->body, f->body_len, c->attestation_sha256);
	why = attestation_check(c, arena, f->body, f->body_len, &code);
	if (why)
	{
		move(c, MLPLAT_CAMPAIGN_CANDIDATE_FAILED, code, why);
		verify_span_end(c, why);
		return;
	}
	c->verify = mlplat_artifact_check_new_object(c->output_uri, c->attested_sha256, 0);
}

/* After the output check: BUILT with the verified artifact, FAILED, or wait. */
static void
after_verify(Cand *c, MlplatPass *pass)
{
	MlplatArtifactCheck *v = c->verify;

	c->ledger_action = "VERIFY";
	c->http_status = v->http_status;
	switch (v->verdict)
	{
		case MLPLAT_ARTIFACT_OK:
			c->ledger_outcome = "OK";
			move(c, MLPLAT_CAMPAIGN_CANDIDATE_BUILT, NULL, psprintf("built; output %s verified (%s)", c->output_uri, v->source));
			verify_span_end(c, NULL);
			return;
		case MLPLAT_ARTIFACT_FAILED:
			c->ledger_outcome = "FAILED";
			c->ledger_error = v->detail;
			if (v->got_sha256)
				move(c, MLPLAT_CAMPAIGN_CANDIDATE_FAILED, "OUTPUT_DIGEST_MISMATCH",
					 psprintf("output %s has sha256 %s; the attestation says %s", c->output_uri, v->got_sha256,
							  c->attested_sha256));
			else if (v->http_status == 404)
				move(c, MLPLAT_CAMPAIGN_CANDIDATE_FAILED, "OUTPUT_MISSING", psprintf("output %s is missing", c->output_uri));
			else
				move(c, MLPLAT_CAMPAIGN_CANDIDATE_FAILED, "OUTPUT_UNVERIFIABLE", psprintf("output %s could not be verified: %s", c->output_uri, v->detail));
			verify_span_end(c, c->status_reason);
			return;
		default:
			c->ledger_outcome = "RETRY";
			c->ledger_error = v->detail;
			c->status_reason = psprintf("waiting to verify %s: %s", c->output_uri, v->detail);
			retry_later(c, pass, false, 0, v->retry_ms);
			verify_span_end(c, c->status_reason);
			return;
	}
}

/* ---------------------------------------------------------------- I/O */

MLPLAT_SEAM_STATIC(claim_seam, campaign_claim, Cand);

MLPLAT_SEAM_ROW_STATIC(writeback_seam, campaign_writeback, CandWriteback);

MlplatSeam *const mlplat_campaigns_seams[] = { &claim_seam, &writeback_seam, NULL };

static void
claim(MlplatPassWork *w, List **out)
{
	MlplatPass *pass = w->pass;
	MlplatClaim c;
	ListCell *lc;

	mlplat_seam_claim_pass(pass, &claim_seam, "SELECT c FROM mlplat._campaigns_claim($1, $2) c", 2,
						   (Oid[]){ INT8OID, TEXTOID },
						   (Datum[]){ Int64GetDatum(pass->epoch), CStringGetTextDatum(pass->controller) },
						   sizeof(Cand), true, 0, &c);
	foreach (lc, c.rows)
	{
		Cand *cand = lfirst(lc);

		if (cand->job_name)
			cand->unanswered = mlplat_unanswered_find(c.notes, cand->id,
													  mlplat_object_path(cand->namespace, cand->job_name), "CREATE");
	}
	*out = c.rows;
	mlplat_pass_work_claimed(w, c.instance, COMPONENT);
}

/* The answer to a create, a stop or a cleanup DELETE. */
static void
request_result(Cand *c, MlplatPass *pass)
{
	MlplatKubeResult res;

	mlplat_kube_parse_status(c->req, &res);
	c->http_status = res.status;
	if (res.status >= 200 && res.status < 500)
		c->answered = true;
	c->write = true;
	if (c->action == CAND_CREATE && res.outcome == MLPLAT_KUBE_EXISTS)
	{
		/* our name is taken: an earlier create, or someone else's Job; read it first */
		c->ledger_outcome = "CONFLICT";
		c->ledger_error = res.message;
		return;
	}
	if (c->action != CAND_CREATE && res.outcome == MLPLAT_KUBE_NOT_FOUND)
	{
		/* already gone: the next pass sees it absent and concludes */
		c->ledger_outcome = "OK";
		c->retry_ms = 0;
		pass->next_pass_ms = FOLLOW_UP_MS;
		return;
	}
	switch (res.outcome)
	{
		case MLPLAT_KUBE_OK:
			c->ledger_outcome = "OK";
			c->retry_ms = 0;
			if (c->action == CAND_CREATE)
			{
				c->mark_created = true;
				c->status_reason = psprintf("builder Job %s/%s created", c->namespace, c->job_name);
			}
			else if (c->action == CAND_STOP)
				c->status_reason = psprintf("Job %s/%s is being deleted (foreground); waiting for it to go",
											c->namespace, c->job_name);
			pass->next_pass_ms = FOLLOW_UP_MS;
			break;
		case MLPLAT_KUBE_FAILED:
			c->ledger_outcome = "FAILED";
			c->ledger_error = mlplat_kube_tenant_line(&res);
			if (c->action == CAND_CREATE && res.status >= 400 && res.status < 500 && res.status != 404)
			{
				move(c, MLPLAT_CAMPAIGN_CANDIDATE_FAILED, "BUILDER_REFUSED", psprintf("the cluster refused the builder Job: %s", mlplat_kube_tenant_line(&res)));
				c->actual_gpu_seconds = 0;
			}
			else
			{
				/* a DELETE refused (RBAC, admission): not a transient error, but retried slowly */
				c->status_reason = psprintf("retrying later: %s", c->ledger_error ? c->ledger_error : "refused");
				retry_later(c, pass, true, 0, 0);
			}
			break;
		default:
			c->ledger_outcome = "RETRY";
			c->ledger_error = mlplat_kube_tenant_line(&res);
			c->status_reason = psprintf("retrying: %s", c->ledger_error ? c->ledger_error : "no answer");
			retry_later(c, pass, false, res.retry_after_s, 0);
			break;
	}
}

/* After 409 answers: read what holds each name, in one follow-up round; adopt our own, report a look-alike. */
static MlplatObservedObject *
existing_ask(MlplatPassWork *w, void *row, MlplatHttpBatch *batch)
{
	Cand *c = row;

	if (c->action != CAND_CREATE || !mlplat_str_same(c->ledger_outcome, "CONFLICT"))
		return NULL;
	mlplat_observe_get(&c->holder, batch, &JOB, c->namespace, c->job_name);
	return &c->holder;
}

static void
existing_answer(MlplatPassWork *w, void *row, const MlplatObservedObject *seen)
{
	Cand *c = row;
	const MlJsonValue *obj = seen->obj;
	char *why;

	if (seen->state != MLPLAT_OBSERVED_FOUND)
	{
		c->ledger_outcome = "RETRY";
		retry_later(c, w->pass, false, seen->retry_after_s, 0);
		return;
	}
	why = not_ours(c, obj);
	if (why)
	{
		c->ledger_action = "ADOPT";
		c->ledger_outcome = "CONFLICT";
		c->status_reason = psprintf("Job %s/%s exists but is not this candidate's: %s; not adopted, not touched",
									c->namespace, c->job_name, why);
		c->ledger_error = c->status_reason;
		return;
	}
	c->ledger_action = "ADOPT";
	c->ledger_outcome = "OK";
	c->ledger_error = NULL;
	c->mark_created = true;
	c->status_reason = psprintf("adopted the existing builder Job %s/%s", c->namespace, c->job_name);
	w->pass->next_pass_ms = FOLLOW_UP_MS;
}

static char *
observation_json(const Cand *c)
{
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfo(&s, "{\"job_created\":%s", (c->created || c->mark_created) ? "true" : "false");
	if (c->job_name)
	{
		appendStringInfoString(&s, ",\"job\":");
		escape_json(&s, mlplat_object_path(c->namespace, c->job_name));
	}
	if (c->obj)
	{
		const char *st = mlplat_json_text(c->obj, "status", "startTime", NULL);
		const char *ct = mlplat_json_text(c->obj, "status", "completionTime", NULL);

		if (st)
		{
			appendStringInfoString(&s, ",\"startTime\":");
			escape_json(&s, st);
		}
		if (ct)
		{
			appendStringInfoString(&s, ",\"completionTime\":");
			escape_json(&s, ct);
		}
	}
	if (c->attestation_sha256[0])
	{
		appendStringInfoString(&s, ",\"attestation_sha256\":");
		escape_json(&s, c->attestation_sha256);
	}
	appendStringInfoChar(&s, '}');
	return s.data;
}

static char *
artifact_json(const Cand *c)
{
	StringInfoData s;
	const MlJsonValue *sbom = ml_json_object_get(c->attestation, "sbom_sha256");

	initStringInfo(&s);
	appendStringInfoString(&s, "{\"output_uri\":");
	escape_json(&s, c->output_uri);
	appendStringInfoString(&s, ",\"output_sha256\":");
	escape_json(&s, c->verify->got_sha256);
	appendStringInfo(&s, ",\"output_bytes\":" INT64_FORMAT, c->attested_bytes);
	appendStringInfoString(&s, ",\"attestation\":");
	appendBinaryStringInfo(&s, c->fetch->body, c->fetch->body_len);
	appendStringInfoString(&s, ",\"attestation_sha256\":");
	escape_json(&s, c->attestation_sha256);
	appendStringInfoString(&s, ",\"verified_by\":");
	escape_json(&s, c->verify->source ? c->verify->source : "unknown");
	appendStringInfoString(&s, ",\"sbom_sha256\":");
	mlplat_json_append_text(&s, sbom && sbom->type == ML_JSON_STRING ? sbom->u.string.str : NULL);
	appendStringInfoChar(&s, '}');
	return s.data;
}

/*
 * The write-back row of c, if it has one (and the note it settles, its ledger
 * rows and spans: the external writes happened whether or not the row's
 * compare-and-swap holds).
 */
static bool
cand_row(MlplatWriteback *wb, void *entity, void *row)
{
	Cand *c = entity;
	CandWriteback *w = row;
	const char *obj = c->job_name ? mlplat_object_path(c->namespace, c->job_name) : NULL;

	if (c->settle_note && c->job_name)
		mlplat_write_notes_add(&wb->settled, c->id, obj, NULL);
	else if (c->answered && c->job_name)
		mlplat_write_notes_answered(&wb->settled, c->id, obj, NULL,
									c->action == CAND_CREATE && mlplat_write_made(c->http_status));
	if (c->write)
	{
		w->status = c->new_status;
		w->reason_code = c->reason_code;
		w->status_reason = c->status_reason;
		w->observation = c->cleanup ? NULL : observation_json(c);
		w->started_at = c->started_at;
		w->actual_gpu_seconds = c->actual_gpu_seconds;
		w->artifact = c->new_status == MLPLAT_CAMPAIGN_CANDIDATE_BUILT ? artifact_json(c) : NULL;
		w->cleanup_done = c->cleanup_done;
		w->retry_ms = c->retry_ms;
	}
	if (c->adopt)
		mlplat_ledger_batch_add(wb->ledger, "campaign_candidate", c->id, c->project, "ADOPT", "OK", NULL, NULL, 0, NULL,
								mlplat_trace_id_of(c->traceparent), obj);
	if (c->ledger_action)
		mlplat_ledger_batch_add(wb->ledger, "campaign_candidate", c->id, c->project, c->ledger_action,
								c->ledger_outcome ? c->ledger_outcome : "OK",
								mlplat_str_same(c->ledger_action, "VERIFY") ? c->attested_sha256 : NULL,
								mlplat_str_same(c->ledger_action, "VERIFY") && c->verify ? c->verify->got_sha256 : NULL,
								c->http_status, c->ledger_error, mlplat_trace_id_of(c->traceparent), obj);
	if (c->span)
		wb->spans = lappend(wb->spans, c->span);
	if (c->vspan)
		wb->spans = lappend(wb->spans, c->vspan);
	return c->write;
}

/* orphans: the ledger rows of the answers to the orphans' DELETEs */
static void
write_back(MlplatPass *pass, List *cands, List *orphans)
{
	MlplatWriteback wb;

	mlplat_writeback_begin(&wb, pass, &writeback_seam, &claim_seam);
	mlplat_writeback_rows(&wb, cands, cand_row, "SELECT * FROM mlplat._campaigns_writeback_set($1, $2)", NULL);
	mlplat_ledger_batch_add_rows(wb.ledger, "campaign_candidate", orphans);
	mlplat_writeback_end(&wb);
}

void
mlplat_campaigns_pass(MlplatPass *pass)
{
	MlplatPassWork w;
	List *cands = NIL;
	List *items;
	List *fetches = NIL;
	List *verifies = NIL;
	List *orphan_rows = NIL;
	ListCell *lc;
	int built = 0;
	TimestampTz now;

	mlplat_pass_work_begin(&w, pass);
	claim(&w, &cands);
	if (cands == NIL && !pass->resync)
	{
		snprintf(pass->status, sizeof(pass->status), "no active candidates");
		return;
	}
	items = mlplat_pass_work_list(&w, &JOB, NULL);
	/* a few candidates a pass at most a few hundred: a linear match is enough */
	foreach (lc, cands)
	{
		Cand *c = lfirst(lc);
		MlJsonError err;
		ListCell *li;

		c->instance = w.instance;
		if (c->manifest)
			c->render = ml_json_parse(w.arena, c->manifest, strlen(c->manifest), NULL, &err);
		if (c->job_name == NULL)
			continue;
		foreach (li, items)
		{
			const MlJsonValue *obj = lfirst(li);

			if (mlplat_str_same(mlplat_json_text(obj, "metadata", "namespace", NULL), c->namespace) &&
				mlplat_str_same(mlplat_json_text(obj, "metadata", "name", NULL), c->job_name))
			{
				c->obj = obj;
				break;
			}
		}
	}

	now = GetCurrentTimestamp();
	foreach (lc, cands)
	{
		Cand *c = lfirst(lc);

		cand_decide(c, now);
		switch (c->action)
		{
			case CAND_CREATE:
				c->req = mlplat_kube_create(w.batch, &JOB, c->namespace, c->manifest);
				c->ledger_action = "CREATE";
				w.creates++;
				break;
			case CAND_STOP:
			case CAND_CLEANUP:
				/* a stop waits for the Job's Pods to go; a cleanup deletes what is done */
				c->req = c->action == CAND_STOP ? mlplat_kube_delete_foreground(w.batch, &JOB, c->namespace, c->job_name)
												: mlplat_kube_delete(w.batch, &JOB, c->namespace, c->job_name);
				c->ledger_action = "DELETE";
				w.deletes++;
				break;
			case CAND_VERIFY:
				c->fetch = mlplat_artifact_fetch_new(c->attestation_uri, ATTESTATION_MAX, 0);
				fetches = lappend(fetches, c->fetch);
				c->vspan = mlplat_span_begin(c->traceparent, "campaigns.verify", MLPLAT_SPAN_INTERNAL);
				mlplat_span_set_entity(c->vspan, c->project, "campaign_candidate", c->id);
				mlplat_span_attr_text(c->vspan, "mlplat.job", c->job_name);
				mlplat_span_attr_text(c->vspan, "mlplat.attestation_uri", c->attestation_uri);
				mlplat_span_attr_text(c->vspan, "mlplat.output_uri", c->output_uri);
				break;
			case CAND_NONE:
				break;
		}
		if (c->cleanup && c->due && c->status != MLPLAT_CAMPAIGN_CANDIDATE_BUILT)
		{
			/* a build that did not succeed leaves nothing behind: its outputs go with its Job */
			c->rm_output = mlplat_artifact_delete_new(c->output_uri, 0);
			c->rm_attestation = mlplat_artifact_delete_new(c->attestation_uri, 0);
			fetches = lappend(lappend(fetches, c->rm_output), c->rm_attestation);
		}
		if (c->req)
		{
			mlplat_write_notes_add(&w.sending, c->id, mlplat_object_path(c->namespace, c->job_name), c->ledger_action);
			c->span = mlplat_span_begin(c->traceparent, c->action == CAND_CREATE ? "campaigns.create" : "campaigns.delete",
										MLPLAT_SPAN_CLIENT);
			mlplat_span_set_entity(c->span, c->project, "campaign_candidate", c->id);
			mlplat_span_attr_text(c->span, "k8s.namespace.name", c->namespace);
			mlplat_span_attr_text(c->span, "mlplat.job", c->job_name);
		}
		if (c->waiting || (c->obj && !c->cleanup && c->action != CAND_VERIFY))
			pass->next_pass_ms = (c->waiting ? 1000 : FOLLOW_UP_MS); /* it moves: look again soon */
	}
	/* orphans: builder Jobs of ours that no claimed candidate owns, on a resync only */
	if (pass->resync)
		foreach (lc, items)
		{
			const MlJsonValue *obj = lfirst(lc);
			const char *ns = mlplat_json_text(obj, "metadata", "namespace", NULL);
			const char *name = mlplat_json_text(obj, "metadata", "name", NULL);
			bool owned = false;
			ListCell *lc2;
			MlplatHttpRequest *r;

			if (ns == NULL || name == NULL || mlplat_json_text(obj, "metadata", "deletionTimestamp", NULL))
				continue;
			foreach (lc2, cands)
			{
				Cand *c = lfirst(lc2);

				owned |= mlplat_str_same(c->namespace, ns) && mlplat_str_same(c->job_name, name);
			}
			if (owned)
				continue;
			r = mlplat_kube_delete(w.batch, &JOB, ns, name);
			r->user = (void *) mlplat_json_text(obj, "metadata", "labels", MLPLAT_LABEL_PROJECT);
			/* not noted: a DELETE is idempotent, and the next resync repeats a lost one */
			w.orphans = lappend(w.orphans, r);
		}

	if (!mlplat_pass_work_notes_commit(&w, "requests"))
		return;
	/* the attestation GETs join the Kubernetes writes in one concurrent batch */
	mlplat_artifact_run(pass, fetches, w.batch);

	foreach (lc, cands)
	{
		Cand *c = lfirst(lc);

		if (c->req)
		{
			request_result(c, pass);
			mlplat_span_end_request(c->span, c->req, c->http_status,
									mlplat_str_same(c->ledger_outcome, "OK")
										? NULL
										: (c->ledger_error ? c->ledger_error : "request failed"));
		}
		if (c->rm_output && c->cleanup_done &&
			(c->rm_output->verdict != MLPLAT_ARTIFACT_OK || c->rm_attestation->verdict != MLPLAT_ARTIFACT_OK))
		{
			/* the outputs are not gone yet: cleanup is not done; a later pass deletes again */
			c->cleanup_done = false;
			retry_later(c, pass, false, 0,
						Max(c->rm_output->verdict == MLPLAT_ARTIFACT_OK ? 0 : c->rm_output->retry_ms,
							c->rm_attestation->verdict == MLPLAT_ARTIFACT_OK ? 0 : c->rm_attestation->retry_ms));
		}
		if (c->fetch)
		{
			after_attestation(c, w.arena, pass);
			if (c->verify)
				verifies = lappend(verifies, c->verify);
		}
	}
	mlplat_pass_work_follow_up(&w, cands, existing_ask, existing_answer);
	/* an orphan's DELETE: r->user is the project its labels name */
	foreach (lc, w.orphans)
	{
		MlplatHttpRequest *r = lfirst(lc);
		MlplatKubeResult res;

		mlplat_kube_write_result(r, true, &res);
		mlplat_ledger_row_add(&orphan_rows, 0, r->user, "ORPHAN_TEARDOWN", res.outcome == MLPLAT_KUBE_OK ? "OK" : "RETRY",
							  res.status, res.outcome == MLPLAT_KUBE_OK ? NULL : res.message, NULL, r->url);
	}
	if (verifies != NIL)
	{
		mlplat_artifact_run(pass, verifies, mlplat_http_batch_create(w.cxt));
		foreach (lc, cands)
		{
			Cand *c = lfirst(lc);

			if (c->verify)
			{
				after_verify(c, pass);
				built += c->new_status == MLPLAT_CAMPAIGN_CANDIDATE_BUILT;
			}
		}
	}
	write_back(pass, cands, orphan_rows);
	mlplat_pass_work_status(&w, NULL, "%d candidates, %d built", list_length(cands), built);
}
