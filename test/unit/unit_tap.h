/*
 * unit_tap.h — TAP output for a plain-C unit test that test/unit/run.sh
 * appends to its stream: results numbered after the count given as the
 * first argument, the plan line last, exit status 1 after a failure.
 *
 *   int main(int argc, char **argv) { unit_tap_begin(argc, argv); ...; return unit_tap_end(); }
 */
#ifndef MLPLAT_UNIT_TAP_H
#define MLPLAT_UNIT_TAP_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/*
 * A fuzz target's property (NULL: it holds) on every file of dir, in name
 * order (README.md and dot files skipped): one result per file, and one for
 * the directory, which must have some.  Inline: a test that replays nothing
 * does not warn.
 */
static inline int
unit_tap_visible(const struct dirent *de)
{
	return de->d_name[0] != '.' && strcmp(de->d_name, "README.md") != 0;
}

static inline void
unit_tap_replay(const char *dir, const char *(*check)(const uint8_t *data, size_t size))
{
	struct dirent **names;
	int n = scandir(dir, &names, unit_tap_visible, alphasort);

	ok(n > 0, "the seed directory has inputs");
	for (int i = 0; i < n; i++)
	{
		char path[1024];
		FILE *f;
		uint8_t *buf = NULL;
		long len = -1;
		const char *bad = "cannot read the file";

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
		free(names[i]);
		if ((f = fopen(path, "rb")) != NULL)
		{
			if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
				(buf = malloc((size_t) len + 1)) != NULL && fread(buf, 1, (size_t) len, f) == (size_t) len)
				bad = check(buf, (size_t) len);
			fclose(f);
		}
		ok(bad == NULL, path);
		if (bad)
			printf("# %s\n", bad);
		free(buf);
	}
	if (n > 0)
		free(names);
}

#endif /* MLPLAT_UNIT_TAP_H */
