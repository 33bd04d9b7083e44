/* fuzz_canonical.c — libFuzzer target; the property lives in props.c. */
#include "props.h"

MLFUZZ_TARGET(mlfuzz_check_canonical)
