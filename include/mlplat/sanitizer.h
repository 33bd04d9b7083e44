/*
 * sanitizer.h — what backend code does for the sanitizer build
 * (test/run.sh --sanitize; src/sanitizer_options.c).
 */
#ifndef MLPLAT_SANITIZER_H
#define MLPLAT_SANITIZER_H

/*
 * Call right before raising an ERROR from frames that may have poisoned
 * stack (ASan) below the catching frame, e.g. a SQL function that reports
 * a refusal from a helper after other helpers have returned: it clears the
 * stack's shadow, which a longjmp leaves stale in this build.  Does nothing
 * in other builds.
 */
extern void mlplat_sanitizer_before_error(void);

#endif							/* MLPLAT_SANITIZER_H */
