/*
 * kube_internal.h — private to src/http/: the configuration override that
 * only the SQL test hooks may set.
 */
#ifndef MLPLAT_KUBE_INTERNAL_H
#define MLPLAT_KUBE_INTERNAL_H

#include "mlplat/kube.h"

/* Use these settings in this backend instead of the GUCs (url NULL: back to the GUCs). */
extern void mlplat_kube_config_override(const char *url, const char *token_file,
										const char *ca_file);

#endif /* MLPLAT_KUBE_INTERNAL_H */
