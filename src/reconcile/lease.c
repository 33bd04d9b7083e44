/*
 * lease.c — the Lease fence (client-go's tryAcquireOrRenew; kube.h): observe
 * the Lease through observe.h (one GET by name, its answer classified as every
 * read by name is), decide on our own clock whether it may be taken, then
 * write (create it, or replace it by resourceVersion).  The leader and the
 * superuser test hook mlplat._kube_lease call it.
 */
#include "postgres.h"

#include <sys/time.h>
#include <time.h>

#include "fmgr.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/json.h"

#include "mlplat/http.h"
#include "mlplat/json.h"
#include "mlplat/json_jsonb.h"
#include "mlplat/kube.h"
#include "mlplat/labels.h"
#include "mlplat/observe.h"

PG_FUNCTION_INFO_V1(mlplat_kube_lease_sql);

const char *
mlplat_lease_result_name(MlplatLeaseResult r)
{
	switch (r)
	{
		case MLPLAT_LEASE_HELD:
			return "held";
		case MLPLAT_LEASE_OTHER:
			return "other";
		case MLPLAT_LEASE_LOST:
			return "lost";
		case MLPLAT_LEASE_ERROR:
			return "error";
		case MLPLAT_LEASE_NO_CLUSTER:
			return "no_cluster";
	}
	return "unknown";
}

static const MlplatKubeResource lease_resource = { "coordination.k8s.io", "v1", "leases", true };
static const MlplatKubeResource namespace_resource = { "", "v1", "namespaces", false };

static double
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec * 1000.0 + (double) ts.tv_nsec / 1000000.0;
}

/* RFC 3339 with microseconds, UTC: the MicroTime format of Lease spec times */
static char *
rfc3339_micro_now(void)
{
	struct timeval tv;
	struct tm tm;
	char buf[40];

	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	return psprintf("%s.%06ldZ", buf, (long) tv.tv_usec);
}

static char *
lease_body(const char *ns, const char *name, const char *rv, const char *identity,
		   int duration_s, const char *acquire, const char *renew, int64 transitions)
{
	StringInfoData b;

	initStringInfo(&b);
	appendStringInfoString(&b, "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":");
	escape_json(&b, name);
	appendStringInfoString(&b, ",\"namespace\":");
	escape_json(&b, ns);
	if (rv)
	{
		appendStringInfoString(&b, ",\"resourceVersion\":");
		escape_json(&b, rv);
	}
	appendStringInfoString(&b, "},\"spec\":{\"holderIdentity\":");
	escape_json(&b, identity);
	appendStringInfo(&b, ",\"leaseDurationSeconds\":%d,\"acquireTime\":", duration_s);
	escape_json(&b, acquire);
	appendStringInfoString(&b, ",\"renewTime\":");
	escape_json(&b, renew);
	appendStringInfo(&b, ",\"leaseTransitions\":" INT64_FORMAT "}}", transitions);
	return b.data;
}

/* run a batch of one write and classify its answer */
static void
run_one(MlplatHttpBatch *b, MlplatHttpRequest *req, bool allow_xact, MlplatKubeResult *res)
{
	if (allow_xact)
		mlplat_http_batch_allow_transaction(b);
	mlplat_http_batch_run(b);
	/* the result is parsed into the current context; the batch can go */
	mlplat_kube_parse_response(req, res);
	mlplat_http_batch_free(b);
}

/* We wrote the Lease (created, taken or renewed) at now: remember it as our own observation. */
static MlplatLeaseResult
held(MlplatLeaseObservation *obs, const char *identity, const char *now, int duration_s)
{
	obs->valid = true;
	strlcpy(obs->holder, identity, sizeof(obs->holder));
	strlcpy(obs->renew_time, now, sizeof(obs->renew_time));
	obs->observed_ms = mono_ms();
	obs->duration_s = duration_s;
	return MLPLAT_LEASE_HELD;
}

static MlplatLeaseResult
lease_impl(MlplatLeaseObservation *obs, const char *ns, const char *name,
		   const char *identity, int duration_s, char **detail, bool allow_xact,
		   MlplatLeasePreemptFn may_preempt)
{
	MlplatHttpBatch *b;
	MlplatHttpRequest *req;
	MlplatObservedObject seen;
	MlplatKubeResult res;
	const char *holder,
		*renew,
		*acquire,
		*rv;
	char *now;
	const char *why = NULL;
	MlplatKubeConfigState cfg;
	int64 dur = duration_s,
		  transitions = 0;
	double t;

	if (detail)
		*detail = NULL;
	if ((cfg = mlplat_kube_config_refresh(&why)) != MLPLAT_KUBE_READY)
	{
		if (detail)
			*detail = pstrdup(why ? why : "");
		return cfg == MLPLAT_KUBE_NOT_CONFIGURED ? MLPLAT_LEASE_NO_CLUSTER : MLPLAT_LEASE_ERROR;
	}

	/* observe: the Lease read by name through observe.h, its answer classified once */
	b = mlplat_http_batch_create(CurrentMemoryContext);
	mlplat_observe_get(&seen, b, &lease_resource, ns, name);
	if (allow_xact)
		mlplat_http_batch_allow_transaction(b);
	mlplat_http_batch_run(b);
	mlplat_observe_got(&seen, mlplat_json_arena_in(CurrentMemoryContext));
	mlplat_http_batch_free(b);
	now = rfc3339_micro_now();

	if (seen.state == MLPLAT_OBSERVED_GONE)
	{
		/* nobody has it: create it held by us */
		b = mlplat_http_batch_create(CurrentMemoryContext);
		req = mlplat_kube_create(b, &lease_resource, ns,
								 lease_body(ns, name, NULL, identity, duration_s, now, now, 0));
		run_one(b, req, allow_xact, &res);
		if (res.outcome == MLPLAT_KUBE_NOT_FOUND)
		{
			/*
			 * The Lease's namespace does not exist yet.  The fence is on by
			 * default whenever a cluster is configured, and a missing
			 * namespace must not leave every reconciler fenced: create it
			 * (mlplat creates namespaces for projects anyway; a 409 means a
			 * peer was faster) and try the Lease once more.
			 */
			StringInfoData nsb;

			initStringInfo(&nsb);
			appendStringInfoString(&nsb, "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":");
			escape_json(&nsb, ns);
			appendStringInfoString(&nsb, ",\"labels\":" MLPLAT_MANAGED_BY_JSON "}}");
			b = mlplat_http_batch_create(CurrentMemoryContext);
			req = mlplat_kube_create(b, &namespace_resource, NULL, nsb.data);
			run_one(b, req, allow_xact, &res);
			if (res.outcome == MLPLAT_KUBE_OK || res.outcome == MLPLAT_KUBE_EXISTS ||
				res.outcome == MLPLAT_KUBE_CONFLICT)
			{
				b = mlplat_http_batch_create(CurrentMemoryContext);
				req = mlplat_kube_create(b, &lease_resource, ns,
										 lease_body(ns, name, NULL, identity, duration_s, now, now, 0));
				run_one(b, req, allow_xact, &res);
			}
		}
		if (res.outcome == MLPLAT_KUBE_OK)
			return held(obs, identity, now, duration_s);
		if (detail)
			*detail = res.message;
		return (res.outcome == MLPLAT_KUBE_EXISTS || res.outcome == MLPLAT_KUBE_CONFLICT)
				   ? MLPLAT_LEASE_LOST
				   : MLPLAT_LEASE_ERROR;
	}
	if (seen.state != MLPLAT_OBSERVED_FOUND)
	{
		/* the whole message (a log line and the test hook's detail, not a tenant's) */
		if (detail)
			*detail = seen.res.message ? seen.res.message : pstrdup("lease GET returned no body");
		return MLPLAT_LEASE_ERROR;
	}

	holder = mlplat_json_text(seen.obj, "spec", "holderIdentity", NULL);
	renew = mlplat_json_text(seen.obj, "spec", "renewTime", NULL);
	acquire = mlplat_json_text(seen.obj, "spec", "acquireTime", NULL);
	rv = mlplat_json_text(seen.obj, "metadata", "resourceVersion", NULL);
	(void) mlplat_json_int(seen.obj, "spec", "leaseDurationSeconds", &dur);
	(void) mlplat_json_int(seen.obj, "spec", "leaseTransitions", &transitions);

	/* measure expiry on our own clock, from when we saw the record change */
	t = mono_ms();
	if (!obs->valid || strcmp(obs->holder, holder ? holder : "") != 0 ||
		strcmp(obs->renew_time, renew ? renew : "") != 0)
	{
		obs->valid = true;
		strlcpy(obs->holder, holder ? holder : "", sizeof(obs->holder));
		strlcpy(obs->renew_time, renew ? renew : "", sizeof(obs->renew_time));
		obs->observed_ms = t;
	}
	obs->duration_s = (int) dur;

	if (holder && holder[0] && strcmp(holder, identity) != 0 &&
		t < obs->observed_ms + (double) dur * 1000.0 &&
		!(may_preempt && may_preempt(holder, identity)))
	{
		if (detail)
			*detail = psprintf("lease %s/%s is held by \"%s\" (renewed %s)", ns, name, holder,
							   renew ? renew : "never");
		return MLPLAT_LEASE_OTHER;
	}

	/* take it (new holder: new acquireTime, one more transition) or renew it */
	if (!(holder && strcmp(holder, identity) == 0))
	{
		acquire = now;
		transitions++;
	}
	b = mlplat_http_batch_create(CurrentMemoryContext);
	req = mlplat_kube_replace(b, &lease_resource, ns, name,
							  lease_body(ns, name, rv, identity, duration_s,
										 acquire ? acquire : now, now, transitions));
	run_one(b, req, allow_xact, &res);
	if (res.outcome == MLPLAT_KUBE_OK)
		return held(obs, identity, now, duration_s);
	if (detail)
		*detail = res.message;
	return res.outcome == MLPLAT_KUBE_CONFLICT ? MLPLAT_LEASE_LOST : MLPLAT_LEASE_ERROR;
}

MlplatLeaseResult
mlplat_kube_lease_acquire_preempting(MlplatLeaseObservation *obs, const char *ns,
									 const char *name, const char *identity, int duration_s,
									 MlplatLeasePreemptFn may_preempt, char **detail)
{
	return lease_impl(obs, ns, name, identity, duration_s, detail, false, may_preempt);
}

/* One remembered observation per backend (re-keyed when the lease changes). */
static MlplatLeaseObservation hook_obs;
static char hook_obs_key[512];

/*
 * mlplat._kube_lease(namespace, name, identity, duration_s)
 *   RETURNS TABLE(result text, detail text)
 */
Datum
mlplat_kube_lease_sql(PG_FUNCTION_ARGS)
{
	char *ns = text_to_cstring(PG_GETARG_TEXT_PP(0));
	char *name = text_to_cstring(PG_GETARG_TEXT_PP(1));
	char *identity = text_to_cstring(PG_GETARG_TEXT_PP(2));
	int duration = PG_GETARG_INT32(3);
	char key[512];
	char *detail;
	MlplatLeaseResult lr;
	TupleDesc tupdesc;
	Datum values[2];
	bool nulls[2] = { 0 };

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	snprintf(key, sizeof(key), "%s/%s", ns, name);
	if (strcmp(key, hook_obs_key) != 0)
	{
		memset(&hook_obs, 0, sizeof(hook_obs));
		strlcpy(hook_obs_key, key, sizeof(hook_obs_key));
	}
	lr = lease_impl(&hook_obs, ns, name, identity, duration, &detail, true, NULL);
	values[0] = CStringGetTextDatum(mlplat_lease_result_name(lr));
	if (detail)
		values[1] = CStringGetTextDatum(detail);
	else
		nulls[1] = true;
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc), values, nulls)));
}
