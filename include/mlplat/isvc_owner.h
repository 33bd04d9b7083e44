/*
 * isvc_owner.h — is an InferenceService found under a deployment's name the
 * deployment's own?  (issue 18, finding 5)
 *
 * The deployments and rollouts reconcilers write a deployment's
 * InferenceService with Server-Side Apply and force, which would take over
 * any object of that name.  Before writing (re-applying, repairing, changing
 * traffic, deleting) an object they found, they ask here: it is the
 * deployment's own only when it carries mlplat's labels of this installation
 * and the content id (annotation mlplat.io/content-id) of one of the
 * deployment's revisions — the render about to be written, or another
 * revision's (the one applied before a redeploy, the rollout's target), which
 * the database knows.  A revision rendered before 0.3.0 carries no id; its
 * object is recognised by carrying none.  Anything else is a conflict: reported
 * by the caller, and not touched.
 */
#ifndef MLPLAT_ISVC_OWNER_H
#define MLPLAT_ISVC_OWNER_H

#include "nodes/pg_list.h"

#include "mlplat/json.h"
#include "mlplat/labels.h"

typedef struct MlplatIsvcOwner
{
	const char *ns;
	const char *name;
	const char *own_content_id; /* of the render the caller writes; NULL: a render without one */
	bool no_render;				/* no render to compare with (an orphan): the database decides */
	const MlJsonValue *obj;		/* the object found under ns/name */
	char *not_ours;				/* out: NULL when it is the deployment's own, else why not */
	void *row;					/* the caller's row the object was found for (not read here) */
} MlplatIsvcOwner;

/*
 * Judge every MlplatIsvcOwner of owners (a List of pointers): labels and the
 * render's own id first; the ids of other revisions are looked up in one short
 * transaction, only when some object carries one.  instance: this
 * installation's id.  No transaction may be open.
 */
extern void mlplat_isvc_judge(List *owners, const char *instance);

#endif /* MLPLAT_ISVC_OWNER_H */
