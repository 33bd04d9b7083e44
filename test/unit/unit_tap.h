/*
 * unit_tap.h — TAP output for a plain-C unit test that test/unit/run.sh
 * appends to its stream: results numbered after the count given as the
 * first argument, the plan line last, exit status 1 after a failure.
 *
 *   int main(int argc, char **argv) { unit_tap_begin(argc, argv); ...; return unit_tap_end(); }
 */
#ifndef MLPLAT_UNIT_TAP_H
#define MLPLAT_UNIT_TAP_H

#include <stdio.h>
#include <stdlib.h>

static int unit_tap_tests = 0;
static int unit_tap_failed = 0;
static int unit_tap_first = 1;

static void
ok(int cond, const char *what)
{
	unit_tap_tests++;
	if (!cond)
		unit_tap_failed++;
	printf("%sok %d - %s\n", cond ? "" : "not ", unit_tap_first + unit_tap_tests - 1, what);
}

static void
unit_tap_begin(int argc, char **argv)
{
	if (argc > 1)
		unit_tap_first = atoi(argv[1]) + 1;
}

static int
unit_tap_end(void)
{
	printf("1..%d\n", unit_tap_first + unit_tap_tests - 1);
	return unit_tap_failed ? 1 : 0;
}

#endif /* MLPLAT_UNIT_TAP_H */
