/* fuzz_spdx.c — libFuzzer target; the property lives in props.c. */
#include <stdio.h>
#include <stdlib.h>

#include "props.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *bad = mlfuzz_check_spdx(data, size);

	if (bad != NULL)
	{
		fprintf(stderr, "property violated: %s\n", bad);
		abort();
	}
	return 0;
}
