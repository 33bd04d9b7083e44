/*
 * sanitizer_options.c — defaults for the sanitizer build (test/run.sh --sanitize).
 *
 * The ASan runtime reaches postgres only through mlplat.so (preloading it into
 * postgres deadlocks at startup), so it must not insist on being loaded first.
 * The options are compiled in because a backend that loads the library late
 * cannot read ASAN_OPTIONS: PostgreSQL reuses the environment's memory for the
 * process title.  Reports go to stderr, which is the server log that
 * test/run.sh scans.  Leak checking is off: backends free by memory context and
 * exit without freeing, which LeakSanitizer would report as leaks.
 */
#if defined(__SANITIZE_ADDRESS__)
#define MLPLAT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MLPLAT_ASAN 1
#endif
#endif

#ifdef MLPLAT_ASAN
const char *__asan_default_options(void);

const char *
__asan_default_options(void)
{
	return "verify_asan_link_order=0:detect_leaks=0:handle_segv=0";
}

/* UBSan likewise: say where. */
const char *__ubsan_default_options(void);

const char *
__ubsan_default_options(void)
{
	return "print_stacktrace=1";
}
#endif

#include "mlplat/sanitizer.h"

#ifdef MLPLAT_ASAN
extern void __asan_handle_no_return(void);
#endif

/*
 * An ERROR leaves our frames by longjmp, and the runtime, which arrives with
 * mlplat.so after libc, does not intercept it: the frames' ASan shadow
 * (redzones, locals whose scope ended) stays where the next calls' frames
 * land, and a frame laid out differently is then reported for touching it.
 * Clear the stack's shadow as the interceptor would have.
 */
void
mlplat_sanitizer_before_error(void)
{
#ifdef MLPLAT_ASAN
	__asan_handle_no_return();
#endif
}
