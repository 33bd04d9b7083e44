/*
 * validate.h — pure validators for caller-supplied identifiers.
 *
 * No I/O and no catalog access, so the SQL API, the workers and the fuzzers
 * all reach exactly the same rules.
 */
#ifndef MLPLAT_VALIDATE_H
#define MLPLAT_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>

/* RFC 1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, 1..max_len bytes. */
extern bool mlplat_dns_label_is_valid(const char *s, size_t len, size_t max_len);
extern bool mlplat_dns1035_label_is_valid(const char *s, size_t len, size_t max_len);

/* W3C trace-context version 00 traceparent, lower-case hex, non-zero ids. */
extern bool mlplat_traceparent_is_valid(const char *s);

/*
 * SPDX license expression (ids, LicenseRef-, WITH, AND, OR, parentheses; NONE
 * and NOASSERTION refused): NULL when valid, else a static reason.
 */
#define MLPLAT_SPDX_MAX_LEN 256
extern const char *mlplat_spdx_check(const char *s, size_t len);

#endif /* MLPLAT_VALIDATE_H */
