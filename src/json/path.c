/*
 * path.c — read a field of a value tree by its path of keys (see
 * mlplat/json.h): the one accessor API every reconciler reads remote bodies
 * with, whatever it observes (Kubernetes objects, MLflow answers, Leases).
 * Pure C like the parser, so the fuzzed and unit-tested code may use it too.
 */
#include <stdint.h>

#include "mlplat/json.h"

const char *
mlplat_json_text(const MlJsonValue *obj, const char *a, const char *b, const char *c)
{
	const MlJsonValue *v = ml_json_object_get(obj, a);

	if (v && b)
		v = ml_json_object_get(v, b);
	if (v && c)
		v = ml_json_object_get(v, c);
	return (v && v->type == ML_JSON_STRING) ? v->u.string.str : NULL;
}

bool
mlplat_json_int(const MlJsonValue *obj, const char *a, const char *b, int64_t *out)
{
	const MlJsonValue *v = ml_json_object_get(ml_json_object_get(obj, a), b);

	if (v == NULL || v->type != ML_JSON_NUMBER || !v->u.number.is_integer)
		return false;
	*out = (int64_t) v->u.number.value;
	return true;
}
