/*
 * http_sql.c — superuser-only SQL test hooks for the HTTP client and backoff.
 *
 * These are the only callers allowed to run a batch with a transaction open
 * (they run in an ordinary backend, inside the statement's transaction).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "mlplat/backoff.h"
#include "mlplat/http.h"

PG_FUNCTION_INFO_V1(mlplat_http_probe);
PG_FUNCTION_INFO_V1(mlplat_backoff_delay_sql);

#define PROBE_BODY_MAX 4096 /* bytes of body echoed back per row */

/*
 * mlplat._http_probe(urls text[], method text DEFAULT 'GET',
 *                    timeout_ms int DEFAULT NULL, connect_timeout_ms int DEFAULT NULL,
 *                    max_body int DEFAULT NULL)
 *   RETURNS TABLE(url text, status int, error text, elapsed_ms float8, body text,
 *                 retry_after_s int, content_type text)
 */
Datum
mlplat_http_probe(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	ArrayType *arr;
	Datum *elems;
	bool *nulls;
	int nelems;
	char *method;
	MemoryContext cxt;
	MlplatHttpBatch *batch;
	int i;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	arr = PG_GETARG_ARRAYTYPE_P(0);
	method = PG_ARGISNULL(1) ? "GET" : text_to_cstring(PG_GETARG_TEXT_PP(1));

	InitMaterializedSRF(fcinfo, 0);

	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &nelems);

	cxt = AllocSetContextCreate(CurrentMemoryContext, "mlplat _http_probe",
								ALLOCSET_DEFAULT_SIZES);
	batch = mlplat_http_batch_create(cxt);
	mlplat_http_batch_allow_transaction(batch);
	for (i = 0; i < nelems; i++)
	{
		MlplatHttpRequest *req;

		req = mlplat_http_batch_add(batch, method, nulls[i] ? "" : TextDatumGetCString(elems[i]));
		if (!PG_ARGISNULL(2))
			req->timeout_ms = PG_GETARG_INT32(2);
		if (!PG_ARGISNULL(3))
			req->connect_timeout_ms = PG_GETARG_INT32(3);
		if (!PG_ARGISNULL(4) && PG_GETARG_INT32(4) >= 0)
			req->max_body = (size_t) PG_GETARG_INT32(4);
	}

	mlplat_http_batch_run(batch);

	for (i = 0; i < nelems; i++)
	{
		MlplatHttpRequest *req = mlplat_http_batch_get(batch, i);
		Datum values[7];
		bool isnull[7] = { false, false, false, false, false, false, false };
		size_t blen = Min(req->resp_len, (size_t) PROBE_BODY_MAX);

		values[0] = CStringGetTextDatum(req->url);
		values[1] = Int32GetDatum(req->status);
		if (req->failed)
			values[2] = CStringGetTextDatum(req->error);
		else
			isnull[2] = true;
		values[3] = Float8GetDatum(req->elapsed_ms);
		/* echo the body only when it is valid text in the database encoding */
		if (req->resp_body != NULL && memchr(req->resp_body, '\0', blen) == NULL &&
			pg_verify_mbstr(GetDatabaseEncoding(), req->resp_body, (int) blen, true))
			values[4] = PointerGetDatum(cstring_to_text_with_len(req->resp_body, (int) blen));
		else
			isnull[4] = true;
		values[5] = Int32GetDatum(req->retry_after_s);
		if (req->content_type)
			values[6] = CStringGetTextDatum(req->content_type);
		else
			isnull[6] = true;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, isnull);
	}

	MemoryContextDelete(cxt);
	return (Datum) 0;
}

/* mlplat._backoff_delay_ms(attempts, base_ms, max_ms, retry_after_s, seed) */
Datum
mlplat_backoff_delay_sql(PG_FUNCTION_ARGS)
{
	int64 d = mlplat_backoff_delay_ms(PG_GETARG_INT32(0), PG_GETARG_INT32(1),
									  PG_GETARG_INT32(2), PG_GETARG_INT32(3),
									  (uint64) (uint32) PG_GETARG_INT32(4));

	PG_RETURN_INT32((int32) Min(d, (int64) PG_INT32_MAX));
}
