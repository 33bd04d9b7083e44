/*
 * labels.h — how mlplat names and marks what it owns in a cluster, defined
 * once for C and, through src/render/labels.c, for SQL.
 *
 * A project's objects live in the namespace "mlp-<project>"; everything
 * mlplat creates carries app.kubernetes.io/managed-by=mlplat and
 * mlplat.io/instance=<the database's instance id>, and a pass LISTs by
 * exactly that selector.  The SQL side asks mlplat._project_namespace(project)
 * and mlplat._managed_by_label(); nothing spells these strings again.
 */
#ifndef MLPLAT_LABELS_H
#define MLPLAT_LABELS_H

#define MLPLAT_NAMESPACE_PREFIX "mlp-"
#define MLPLAT_LABEL_MANAGED_BY "app.kubernetes.io/managed-by"
#define MLPLAT_MANAGED_BY "mlplat"
#define MLPLAT_LABEL_INSTANCE "mlplat.io/instance"
#define MLPLAT_LABEL_PROJECT "mlplat.io/project"
#define MLPLAT_LABEL_COMPONENT "app.kubernetes.io/component"
/* a rendered object's own content id (that of the render without it): Workflows, InferenceServices */
#define MLPLAT_ANNOTATION_CONTENT_ID "mlplat.io/content-id"
/* a project namespace's owner: the id of the project row it was made for */
#define MLPLAT_ANNOTATION_PROJECT_ID "mlplat.io/project-id"

/* {"app.kubernetes.io/managed-by":"mlplat"} as JSON text, for bodies built as strings */
#define MLPLAT_MANAGED_BY_JSON "{\"" MLPLAT_LABEL_MANAGED_BY "\":\"" MLPLAT_MANAGED_BY "\"}"

/* "mlp-<project>", palloc'd */
extern char *mlplat_project_namespace(const char *project, int len);

/* the label selector of everything this instance manages, palloc'd */
extern char *mlplat_managed_selector(const char *instance);

#endif /* MLPLAT_LABELS_H */
