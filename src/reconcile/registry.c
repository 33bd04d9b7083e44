/*
 * registry.c — the kinds the worker loop runs: each kind's pass and seam.
 *
 * A kind without a pass function still gets its leader; the health view
 * reports that nothing reconciles it, rather than pretending.
 */
#include "postgres.h"

#include "mlplat/observe.h"
#include "mlplat/otlp_export.h"
#include "mlplat/reconcile.h"
#include "mlplat/retention.h"
#include "mlplat/seam.h"
#include "mlplat/unanswered.h"

/*
 * The projects leader also purges what is past retention (when pg_cron does
 * not): one per database.
 */
static const MlplatPassFn projects_companions[] = { mlplat_retention_pass, NULL };

static const MlplatKindDef kind_defs[MLPLAT_MAX_KINDS] = {
	[MLPLAT_KIND_PROJECTS] = { mlplat_projects_pass, mlplat_projects_seams, projects_companions, .needs_cluster = true },
	[MLPLAT_KIND_DEPLOYMENTS] = { mlplat_deployments_pass, mlplat_deployments_seams, .needs_cluster = true, .idle = mlplat_deployments_idle },
	[MLPLAT_KIND_RUNS] = { mlplat_runs_pass, mlplat_runs_seams, .needs_cluster = true },
	[MLPLAT_KIND_ROLLOUTS] = { mlplat_rollouts_pass, mlplat_rollouts_seams, .needs_cluster = true },
	[MLPLAT_KIND_MODEL_ALIASES] = { mlplat_model_aliases_pass, mlplat_model_aliases_seams },
	[MLPLAT_KIND_LAB_RUNS] = { mlplat_lab_runs_pass, mlplat_lab_runs_seams, .needs_cluster = true },
	[MLPLAT_KIND_CAMPAIGNS] = { mlplat_campaigns_pass, mlplat_campaigns_seams, .needs_cluster = true },
	/* the span exporter: a leader of its own, so the projects loop does only projects */
	[MLPLAT_KIND_SPAN_EXPORT] = { mlplat_otlp_export_pass, mlplat_span_export_seams },
#ifdef MLPLAT_TEST_KINDS
	/* test kinds (test/kinds/): their SQL is the extension mlplat_test */
	[MLPLAT_KIND_ECHOES] = { mlplat_echoes_pass, mlplat_echoes_seams, NULL, "mlplat_test", .needs_cluster = true },
#endif
};

const MlplatKindDef *
mlplat_kind_def(int kind)
{
	Assert(kind >= 0 && kind < mlplat_num_kinds);
	return &kind_defs[kind];
}

/*
 * Every kind that talks to Kubernetes idles alike while no cluster is
 * configured or its configuration is unusable: checked here, once, not at the
 * top of each pass.
 */
void
mlplat_kind_pass(MlplatPass *pass)
{
	const MlplatKindDef *def = mlplat_kind_def(pass->kind);
	const char *why = NULL;

	if (def->needs_cluster && !mlplat_cluster_ready(pass, &why))
		return;
	def->pass(pass);
}

char *
mlplat_kind_seams_verify(int kind)
{
	const MlplatKindDef *def = mlplat_kind_def(kind);

	char *why;

	for (int i = 0; def->seams && def->seams[i]; i++)
	{
		why = mlplat_seam_verify(def->seams[i]);
		if (why)
			return psprintf("type mlplat.%s does not match this library: %s",
							def->seams[i]->type_name, why);
		/* the state machine of each status the seam carries (states.h) */
		for (int f = 0; f < def->seams[i]->nfields; f++)
			if (def->seams[i]->fields[f].type == MLPLAT_SEAM_STATUS &&
				(why = mlplat_states_verify(MLPLAT_SEAM_MACHINE(def->seams[i]->fields[f].flags))) != NULL)
				return psprintf("the %s statuses do not match this library: %s",
								mlplat_machine_name(MLPLAT_SEAM_MACHINE(def->seams[i]->fields[f].flags)), why);
	}
	/* the write-ahead notes, which every reconciler kind reads (the span exporter is none) */
	if (def->seams && kind != MLPLAT_KIND_SPAN_EXPORT && (why = mlplat_seam_verify(&mlplat_unanswered_seam)) != NULL)
		return psprintf("type mlplat.unanswered_note does not match this library: %s", why);
	return NULL;
}
