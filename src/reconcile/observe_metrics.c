/*
 * observe_metrics.c — observing a metric of what runs in the cluster: one
 * instant query of Prometheus (observe.h).  What to ask is the kind's
 * (prometheus.h's presets); how it is asked and read is here, once.
 */
#include "postgres.h"

#include "mlplat/guc.h"
#include "mlplat/http.h"
#include "mlplat/kube.h"
#include "mlplat/observe.h"
#include "mlplat/prometheus.h"

bool
mlplat_observe_metrics_configured(void)
{
	return mlplat_prometheus_url != NULL && mlplat_prometheus_url[0] != '\0';
}

MlplatHttpRequest *
mlplat_observe_metric(MlplatHttpBatch *batch, const char *promql, int64 at_ms)
{
	MlplatHttpRequest *q;

	if (!mlplat_observe_metrics_configured())
		return NULL;
	q = mlplat_http_batch_add(batch, "GET",
							  psprintf("%s/api/v1/query?query=%s&time=" INT64_FORMAT ".%03d", mlplat_prometheus_url,
									   mlplat_url_encode(promql), at_ms / 1000, (int) (at_ms % 1000)));
	mlplat_http_request_add_header(q, "Accept", "application/json");
	return q;
}

bool
mlplat_observe_metric_read(MlJsonArena *arena, const MlplatHttpRequest *q, double *value, const char **why)
{
	MlPromResult res;

	if (ml_prom_parse_instant(arena, q->failed ? 0 : q->status, q->failed ? NULL : q->resp_body, q->resp_len,
							  &res) == ML_PROM_VALUE &&
		res.value >= 0)
	{
		*value = res.value;
		*why = NULL;
		return true;
	}
	*why = q->failed ? q->error : (res.outcome == ML_PROM_VALUE ? "negative" : pstrdup(res.why));
	return false;
}
