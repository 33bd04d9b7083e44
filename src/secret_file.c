/*
 * secret_file.c — credentials read from files, re-read when the file changes.
 * See include/mlplat/secret_file.h.
 *
 * A file anyone but the server's user (or root) could have written is not a
 * credential we can trust: it is refused, not read, and nothing is sent with
 * it.  A file larger than its limit is refused too: a secret cut short would
 * be sent as if it were whole.  A refusal is logged once when it starts (and
 * once when the file is usable again), and its reason stays available for the
 * worker's status line.
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "utils/memutils.h"

#include "mlplat/secret_file.h"

/* Files of this process that are refused right now (a handful: one per setting). */
#define MAX_WATCHED 8
static MlplatSecretFile *refused_files[MAX_WATCHED];

void
mlplat_secret_file_forget(MlplatSecretFile *sf)
{
	if (sf->content)
	{
		explicit_bzero(sf->content, sf->size);
		pfree(sf->content);
		sf->content = NULL;
	}
	sf->size = 0;
	memset(&sf->st, 0, sizeof(sf->st));
}

/*
 * Record why sf is unusable: log it when the reason is new, remember it for
 * mlplat_secret_file_refusal().  Returns the reason, palloc'd for the caller.
 */
static char *
refuse(MlplatSecretFile *sf, char *why)
{
	if (sf->refused == NULL || strcmp(sf->refused, why) != 0)
	{
		ereport(LOG,
				(errmsg("mlplat: %s", why),
				 errdetail("Nothing is sent with this credential until the file is fixed.")));
		if (sf->refused)
			pfree(sf->refused);
		sf->refused = MemoryContextStrdup(TopMemoryContext, why);
	}
	for (int i = 0; i < MAX_WATCHED; i++)
		if (refused_files[i] == sf)
			return why;
	for (int i = 0; i < MAX_WATCHED; i++)
		if (refused_files[i] == NULL)
		{
			refused_files[i] = sf;
			break;
		}
	return why;
}

static void
accept_file(MlplatSecretFile *sf, const char *what, const char *path)
{
	if (sf->refused == NULL)
		return;
	if (what)
		ereport(LOG, (errmsg("mlplat: %s \"%s\" is usable again", what, path)));
	pfree(sf->refused);
	sf->refused = NULL;
	for (int i = 0; i < MAX_WATCHED; i++)
		if (refused_files[i] == sf)
			refused_files[i] = NULL;
}

const char *
mlplat_secret_file_refusal(void)
{
	for (int i = 0; i < MAX_WATCHED; i++)
		if (refused_files[i] != NULL && refused_files[i]->refused != NULL)
			return refused_files[i]->refused;
	return NULL;
}

/*
 * NULL when a file with this status may hold a credential: a regular file,
 * owned by the server's user or root (as PostgreSQL asks of ssl_key_file),
 * writable by its owner alone.  Readable by group or others is allowed: a
 * mounted Kubernetes secret usually is.
 */
static char *
unsafe_file(const struct stat *st, const char *what, const char *path)
{
	if (!S_ISREG(st->st_mode))
		return psprintf("%s refused: not a regular file: \"%s\"", what, path);
	if (st->st_uid != geteuid() && st->st_uid != 0)
		return psprintf("%s refused: owned by uid %u, not the server's user (uid %u) or root: \"%s\"",
						what, (unsigned) st->st_uid, (unsigned) geteuid(), path);
	if (st->st_mode & (S_IWGRP | S_IWOTH))
		return psprintf("%s refused: writable by %s (mode %04o; chmod go-w): \"%s\"",
						what, (st->st_mode & S_IWOTH) ? "everyone" : "its group",
						(unsigned) (st->st_mode & 07777), path);
	return NULL;
}

static bool
same_file(const struct stat *a, const struct stat *b)
{
	return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
		   a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

char *
mlplat_secret_file_refresh(MlplatSecretFile *sf, const char *path, const char *what,
						   size_t max, MlplatSecretShape shape, bool *changed)
{
	struct stat st;
	char *buf;
	size_t len = 0;
	ssize_t n;
	int fd;
	int save_errno;
	char *bad = NULL;
	bool cut;
	char extra;

	if (changed)
		*changed = false;
	if (path == NULL || path[0] == '\0')
	{
		/* no file configured: nothing to refuse (the caller says what is missing) */
		mlplat_secret_file_forget(sf);
		accept_file(sf, NULL, NULL);
		return NULL;
	}
	if (sf->path == NULL || strcmp(sf->path, path) != 0)
	{
		mlplat_secret_file_forget(sf);
		if (sf->path)
			pfree(sf->path);
		sf->path = MemoryContextStrdup(TopMemoryContext, path);
	}
	if (stat(path, &st) != 0)
	{
		save_errno = errno;
		mlplat_secret_file_forget(sf);
		return refuse(sf, psprintf("cannot read %s \"%s\": %s", what, path, strerror(save_errno)));
	}
	/* checked on every refresh: a chmod changes no size or modification time */
	if ((bad = unsafe_file(&st, what, path)) != NULL)
	{
		mlplat_secret_file_forget(sf);
		return refuse(sf, bad);
	}
	if (sf->content && same_file(&st, &sf->st))
		return NULL;
	mlplat_secret_file_forget(sf);

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
	{
		save_errno = errno;
		return refuse(sf, psprintf("cannot open %s \"%s\": %s", what, path, strerror(save_errno)));
	}
	/* what was opened, not what the path named a moment ago, is what counts */
	if (fstat(fd, &st) != 0)
	{
		save_errno = errno;
		close(fd);
		return refuse(sf, psprintf("cannot read %s \"%s\": %s", what, path, strerror(save_errno)));
	}
	if ((bad = unsafe_file(&st, what, path)) != NULL)
	{
		close(fd);
		return refuse(sf, bad);
	}
	/* max + 1 zeroed bytes: the content is always NUL-terminated */
	buf = MemoryContextAllocZero(TopMemoryContext, max + 1);
	while (len < max && (n = read(fd, buf + len, max - len)) > 0)
		len += n;
	/* one byte more means the file does not fit: never use the part that did */
	cut = len == max && read(fd, &extra, 1) > 0;
	close(fd);
	if (cut)
	{
		explicit_bzero(buf, max + 1);
		pfree(buf);
		return refuse(sf, psprintf("%s refused: larger than %zu bytes (not used cut short): \"%s\"",
								   what, max, path));
	}
	if (shape == MLPLAT_SECRET_TOKEN)
	{
		/* files usually end with a newline; a header value may not hold one */
		while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' ||
						   buf[len - 1] == ' ' || buf[len - 1] == '\t'))
			buf[--len] = '\0';
		if (len == 0 || strpbrk(buf, "\r\n") != NULL)
		{
			explicit_bzero(buf, max + 1);
			pfree(buf);
			return refuse(sf, psprintf("%s \"%s\" is empty or malformed", what, path));
		}
	}
	sf->content = buf;
	sf->size = max + 1;
	sf->st = st;
	accept_file(sf, what, path);
	if (changed)
		*changed = true;
	return NULL;
}
