/*
 * secret_file.c — credentials read from files, re-read when the file changes.
 * See include/mlplat/secret_file.h.
 */
#include "postgres.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "utils/memutils.h"

#include "mlplat/secret_file.h"

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
	char	   *buf;
	size_t		len = 0;
	ssize_t		n;
	int			fd;
	int			save_errno;

	if (changed)
		*changed = false;
	if (path == NULL || path[0] == '\0')
	{
		mlplat_secret_file_forget(sf);
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
		return psprintf("cannot read %s \"%s\": %s", what, path, strerror(save_errno));
	}
	if (sf->content && same_file(&st, &sf->st))
		return NULL;
	mlplat_secret_file_forget(sf);

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
	{
		save_errno = errno;
		return psprintf("cannot open %s \"%s\": %s", what, path, strerror(save_errno));
	}
	/* max + 1 zeroed bytes: the content is always NUL-terminated */
	buf = MemoryContextAllocZero(TopMemoryContext, max + 1);
	while (len < max && (n = read(fd, buf + len, max - len)) > 0)
		len += n;
	close(fd);
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
			return psprintf("%s \"%s\" is empty or malformed", what, path);
		}
	}
	sf->content = buf;
	sf->size = max + 1;
	sf->st = st;
	if (changed)
		*changed = true;
	return NULL;
}
