-- 56_artifacts: what the deployments reconciler learned about artifacts in the
-- object store.  Before the first apply of a revision it checks that the model
-- version's artifact exists and that its SHA-256 is the registered one
-- (src/reconcile/artifact.c).  A download to hash an object is the expensive
-- part, so the digest found is kept per (URI, ETag): a second revision of the
-- same artifact, a restart or another leader does not download it again, and
-- an object written anew gets a new ETag and is hashed again.

CREATE TABLE mlplat.artifact_digests (
  uri          text NOT NULL,
  etag         text NOT NULL,
  sha256       text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  size_bytes   bigint,
  -- never x-amz-meta-sha256: user metadata is whatever the uploader wrote, not proof
  source       text NOT NULL CHECK (source IN ('download', 'x-amz-checksum-sha256')),
  verified_at  timestamptz NOT NULL DEFAULT pg_catalog.now(),
  PRIMARY KEY (uri, etag)
);
REVOKE ALL ON mlplat.artifact_digests FROM PUBLIC;
COMMENT ON TABLE mlplat.artifact_digests IS
  'SHA-256 of object-store artifacts as found by the deployments reconciler, per URI and ETag (a cache: deleting rows only costs downloads).';

-- The artifact of each (deployment, revision) to check, with every digest
-- already known for its URI (etags[i] has digest sha256s[i]); ord is the
-- position in the arrays passed (1-based).  Read by name through the seam (seam.h).
CREATE TYPE mlplat.artifact_check_claim AS (
  ord bigint, artifact_uri text, artifact_sha256 text, etags text[], sha256s text[]);

CREATE FUNCTION mlplat._artifact_claim(p_deployment_ids bigint[], p_revisions int[])
RETURNS SETOF mlplat.artifact_check_claim
LANGUAGE sql STABLE
AS $$
  SELECT w.ord, v.artifact_uri, v.artifact_sha256,
         (SELECT pg_catalog.array_agg(a.etag ORDER BY a.etag) FROM mlplat.artifact_digests a WHERE a.uri = v.artifact_uri),
         (SELECT pg_catalog.array_agg(a.sha256 ORDER BY a.etag) FROM mlplat.artifact_digests a WHERE a.uri = v.artifact_uri)
    FROM unnest(p_deployment_ids, p_revisions) WITH ORDINALITY AS w(id, rev, ord)
    JOIN mlplat.deployment_revisions r ON r.deployment_id = w.id AND r.revision = w.rev
    JOIN mlplat.model_versions v ON v.id = r.model_version_id
$$;
REVOKE ALL ON FUNCTION mlplat._artifact_claim(bigint[], int[]) FROM PUBLIC;

CREATE FUNCTION mlplat._artifact_remember(p_uri text, p_etag text, p_sha256 text, p_size bigint, p_source text)
RETURNS void
LANGUAGE sql
AS $$
  INSERT INTO mlplat.artifact_digests AS a (uri, etag, sha256, size_bytes, source)
  VALUES (p_uri, p_etag, p_sha256, p_size, p_source)
  ON CONFLICT (uri, etag) DO UPDATE
     SET sha256 = excluded.sha256, size_bytes = excluded.size_bytes, source = excluded.source,
         verified_at = pg_catalog.now()
$$;
REVOKE ALL ON FUNCTION mlplat._artifact_remember(text, text, text, bigint, text) FROM PUBLIC;
