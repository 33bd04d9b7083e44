/*
 * rollout_jsonb.h — an evidence record's fields straight from its jsonb
 * (backend only), for ml_rollout_read_evidence_fields (mlplat/rollout.h).
 *
 * A fast path only: it takes records of exactly the evidence shape whose
 * every leaf is a scalar the tree route would read the same way, and
 * declines anything else (another shape, a container where a field belongs,
 * a number that is not a finite double or whose text takes
 * ML_NUMERIC_TEXT_MAX bytes, a database encoding other than UTF-8).  The
 * caller then reads the record as a tree, which reports any error as it
 * always did.  It reads the jsonb through PostgreSQL's public API only
 * (src/rollout/evidence_jsonb.c).
 */
#ifndef MLPLAT_ROLLOUT_JSONB_H
#define MLPLAT_ROLLOUT_JSONB_H

#include "postgres.h"

#include "utils/jsonb.h"

#include "mlplat/json.h"
#include "mlplat/json_jsonb.h"
#include "mlplat/rollout.h"

typedef struct MlRolloutEvidenceFields
{
	const MlJsonValue *fields[ML_EV_NFIELDS]; /* what to hand over */
	MlJsonValue values[ML_EV_NFIELDS];		  /* fields[i] points here */
} MlRolloutEvidenceFields;

/*
 * Fill *out from jb, or false: read the record as a tree.  Strings point
 * into jb, which must outlive the use of the fields; number texts into a
 * per-process memo, valid until the next call.
 */
extern bool ml_rollout_evidence_from_jsonb(Jsonb *jb, MlRolloutEvidenceFields *out);

#endif /* MLPLAT_ROLLOUT_JSONB_H */
