/*
 * props.h — the properties the fuzz targets check, shared with the unit test
 * so every crash input saved in fuzz/regressions/ is replayed by
 * test/unit/json_test.c against exactly the same checks.
 *
 * Each returns NULL when the property holds, otherwise a static description
 * of what broke (the fuzz targets abort() on it).
 */
#ifndef MLPLAT_FUZZ_PROPS_H
#define MLPLAT_FUZZ_PROPS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/*
 * The libFuzzer entry point of a target whose property is check (a function
 * of (data, size) returning NULL or what broke): a violated property aborts,
 * so libFuzzer saves the input as a crash.  Built with -DMLPLAT_NO_FUZZ_MAIN
 * (the unit tests, which replay the property themselves) it is left out.
 */
#ifdef MLPLAT_NO_FUZZ_MAIN
#define MLFUZZ_TARGET(check)
#else
#define MLFUZZ_TARGET(check) \
	int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size); \
	int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) \
	{ \
		const char *bad_ = check(data, size); \
		if (bad_ != NULL) \
		{ \
			fprintf(stderr, "property violated: %s\n", bad_); \
			abort(); \
		} \
		return 0; \
	}
#endif

/* parse never crashes; errors carry a message and an in-range offset */
extern const char *mlfuzz_check_parse(const uint8_t *data, size_t size);

/* parse → canonical → parse → canonical is a fixed point; ids agree */
extern const char *mlfuzz_check_canonical(const uint8_t *data, size_t size);

/* desired NUL observed: diff succeeds, diff(x,x) and diff(x,canon(x)) empty */
extern const char *mlfuzz_check_spec_diff(const uint8_t *data, size_t size);

/* validators agree with a regex-based reference */
extern const char *mlfuzz_check_names(const uint8_t *data, size_t size);

/* SPDX expressions: no crash, a reason on refusal, and validity is stable
 * under wrapping in parentheses and refused with a dangling operator */
extern const char *mlfuzz_check_spdx(const uint8_t *data, size_t size);

/* all of the above */
extern const char *mlfuzz_check_all(const uint8_t *data, size_t size);

#endif
