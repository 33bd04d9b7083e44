/*
 * s3_test.c — unit test of the pure S3 helpers (src/http/s3.c; TAP, no PostgreSQL).
 *
 * The SigV4 cases are the worked examples of AWS's "Signature Calculations for
 * the Authorization Header" page for S3 (GET Object, PUT Object, GET Bucket
 * lifecycle, GET Bucket list objects): example access key AKIAIOSFODNN7EXAMPLE,
 * date 20130524T000000Z, region us-east-1; the inputs, the string to sign and
 * the signatures below are the facts that page publishes.
 *
 * Usage: s3_test [number of tests before these]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlplat/canonical.h"
#include "mlplat/s3.h"

#include "unit_tap.h"

static void
is_str(const char *got, const char *want, const char *what)
{
	int same = got && want && strcmp(got, want) == 0;

	ok(same, what);
	if (!same)
		printf("#   got:  %s\n#   want: %s\n", got ? got : "(null)", want ? want : "(null)");
}

#define EMPTY_SHA "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define AKID "AKIAIOSFODNN7EXAMPLE"
#define SECRET "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define HOST "examplebucket.s3.amazonaws.com"

static void
sigv4_case(const char *what, const char *method, const char *raw_path, const char *query,
		   const MlS3Header *hs, int n, const char *payload, const char *want_sts_hash,
		   const char *want_auth)
{
	MlSigV4Input in;
	char uri[256];
	char auth[512];
	char sts[512];
	char label[256];
	char want_sts[256];

	ml_s3_uri_encode(raw_path, true, uri, sizeof(uri));
	memset(&in, 0, sizeof(in));
	in.method = method;
	in.canonical_uri = uri;
	in.canonical_query = query;
	in.headers = hs;
	in.nheaders = n;
	in.payload_hash = payload;
	in.amz_date = "20130524T000000Z";
	in.region = "us-east-1";
	in.service = "s3";
	in.access_key_id = AKID;
	in.secret_access_key = SECRET;
	snprintf(label, sizeof(label), "sigv4 %s: signs", what);
	ok(ml_sigv4_authorization(&in, auth, sizeof(auth), sts, sizeof(sts)), label);
	snprintf(want_sts, sizeof(want_sts), "AWS4-HMAC-SHA256\n20130524T000000Z\n20130524/us-east-1/s3/aws4_request\n%s",
			 want_sts_hash);
	snprintf(label, sizeof(label), "sigv4 %s: string to sign (canonical request hash)", what);
	is_str(sts, want_sts, label);
	snprintf(label, sizeof(label), "sigv4 %s: Authorization header", what);
	is_str(auth, want_auth, label);
}

static void
test_sigv4(void)
{
	MlS3Header get_obj[] = {
		{ "Host", HOST }, { "Range", "bytes=0-9" }, { "x-amz-content-sha256", EMPTY_SHA }, { "x-amz-date", "20130524T000000Z" }
	};
	MlS3Header put_obj[] = {
		{ "Host", HOST }, { "Date", "Fri, 24 May 2013 00:00:00 GMT" }, { "x-amz-date", "20130524T000000Z" }, { "x-amz-storage-class", "REDUCED_REDUNDANCY" }, { "x-amz-content-sha256", "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072" }
	};
	MlS3Header bucket[] = {
		{ "x-amz-date", "20130524T000000Z" }, { "Host", HOST }, { "x-amz-content-sha256", EMPTY_SHA }
	};
	char payload_hash[65];
	MlSigV4Input in;
	char auth[512];
	MlS3Header dup[] = { { "Host", HOST }, { "host", HOST } };

	sigv4_case("GET Object", "GET", "/test.txt", "", get_obj, 4, EMPTY_SHA,
			   "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972",
			   "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
			   "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
			   "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");

	ml_sha256_hex("Welcome to Amazon S3.", 21, payload_hash);
	is_str(payload_hash, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072",
		   "sha256 of the PUT example's body");
	sigv4_case("PUT Object ('$' in the key is encoded)", "PUT", "/test$file.text", "", put_obj, 5, payload_hash,
			   "9e0e90d9c76de8fa5b200d8c849cd5b8dc7a3be3951ddb7f6a76b4158342019d",
			   "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
			   "SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class,"
			   "Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
	sigv4_case("GET Bucket lifecycle", "GET", "/", "lifecycle=", bucket, 3, EMPTY_SHA,
			   "9766c798316ff2757b517bc739a67f6213b4ab36dd5da2f94eaebf79c77395ca",
			   "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
			   "SignedHeaders=host;x-amz-content-sha256;x-amz-date,"
			   "Signature=fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
	sigv4_case("GET Bucket list objects", "GET", "/", "max-keys=2&prefix=J", bucket, 3, EMPTY_SHA,
			   "df57d21db20da04d7fa30298dd4488ba3a2b47ca3a489c74750e0f1e7df1b9b7",
			   "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
			   "SignedHeaders=host;x-amz-content-sha256;x-amz-date,"
			   "Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");

	/* blanks in a value are trimmed and collapsed: the GET Object signature does not change */
	{
		MlS3Header spaced[] = {
			{ "HOST", "  " HOST " " }, { "range", "bytes=0-9" }, { "X-Amz-Content-Sha256", EMPTY_SHA }, { "x-amz-date", "20130524T000000Z" }
		};

		sigv4_case("GET Object (header names in any case, padded values)", "GET", "/test.txt", "", spaced, 4,
				   EMPTY_SHA, "7344ae5b7ee6c3e7e6b0fe0640412a37625d1fbfff95c48bbb2dc43964946972",
				   "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
				   "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
				   "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
	}

	memset(&in, 0, sizeof(in));
	in.method = "GET";
	in.canonical_uri = "/";
	in.canonical_query = "";
	in.headers = get_obj;
	in.nheaders = 4;
	in.payload_hash = EMPTY_SHA;
	in.amz_date = "20130524T000000Z";
	in.region = "us-east-1";
	in.service = "s3";
	in.access_key_id = AKID;
	in.secret_access_key = SECRET;
	ok(!ml_sigv4_authorization(&in, auth, 40, NULL, 0), "sigv4: a too small output buffer is refused, not overrun");
	in.headers = dup;
	in.nheaders = 2;
	ok(!ml_sigv4_authorization(&in, auth, sizeof(auth), NULL, 0), "sigv4: a repeated header name is refused");
	in.headers = get_obj;
	in.nheaders = 4;
	in.region = "us-east-1/x";
	ok(!ml_sigv4_authorization(&in, auth, sizeof(auth), NULL, 0), "sigv4: a '/' in the region is refused");
	in.region = "us-east-1";
	in.amz_date = "2013";
	ok(!ml_sigv4_authorization(&in, auth, sizeof(auth), NULL, 0), "sigv4: a malformed date is refused");

	{
		char d[17];

		ml_sigv4_amz_date(1369353600LL, d);
		is_str(d, "20130524T000000Z", "amz date of 2013-05-24 00:00:00 UTC");
	}
}

static void
test_uri(void)
{
	char b[64];
	char k[1100];
	char longkey[1100];
	char enc[64];
	static const char *const bad[][2] = {
		{ "s3:/models/x", "not s3://" },
		{ "S3://models/x", "upper-case scheme" },
		{ "s3://models", "bucket only" },
		{ "s3://models/", "empty key" },
		{ "s3://ab/x", "bucket too short" },
		{ "s3://Models/x", "upper-case bucket" },
		{ "s3://-models/x", "bucket starting with '-'" },
		{ "s3://models./x", "bucket ending with '.'" },
		{ "s3://mo_dels/x", "bucket with '_'" },
		{ "s3://user@models/x", "userinfo in the bucket" },
		{ "s3://models:9000/x", "port in the bucket" },
		{ "s3://models/a/../etc/passwd", "'..' segment" },
		{ "s3://models/./x", "'.' segment" },
		{ "s3://models/x/..", "trailing '..' segment" },
		{ "s3://models/a\nb", "newline in the key" },
		{ "s3://models/a\rHost: evil", "CR in the key (header injection)" },
		{ "s3://models/a\x7f", "DEL in the key" },
		{ "", "empty string" },
	};

	ok(ml_s3_parse_uri("s3://models/iris/1/model.bin", b, sizeof(b), k, sizeof(k)) == NULL &&
		   strcmp(b, "models") == 0 && strcmp(k, "iris/1/model.bin") == 0,
	   "s3://models/iris/1/model.bin parses");
	ok(ml_s3_parse_uri("s3://my.bucket-1/a b/%2e%2e/ü?x#y", b, sizeof(b), k, sizeof(k)) == NULL &&
		   strcmp(b, "my.bucket-1") == 0 && strcmp(k, "a b/%2e%2e/ü?x#y") == 0,
	   "odd but legal keys (blank, '%', UTF-8, '?', '#') are kept verbatim");
	ok(ml_s3_parse_uri(NULL, b, sizeof(b), k, sizeof(k)) != NULL, "NULL is refused");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
	{
		char label[128];

		snprintf(label, sizeof(label), "refused: %s", bad[i][1]);
		ok(ml_s3_parse_uri(bad[i][0], b, sizeof(b), k, sizeof(k)) != NULL, label);
	}
	memset(longkey, 'a', 1025);
	longkey[1025] = '\0';
	memcpy(longkey, "s3://mod/", 9);
	ok(ml_s3_parse_uri(longkey, b, sizeof(b), k, sizeof(k)) == NULL, "a 1016-byte key is accepted");
	memset(longkey, 'a', 1040);
	longkey[1040] = '\0';
	memcpy(longkey, "s3://mod/", 9);
	ok(ml_s3_parse_uri(longkey, b, sizeof(b), k, sizeof(k)) != NULL, "a 1031-byte key is refused");
	ok(ml_s3_parse_uri("s3://models/x", b, 4, k, sizeof(k)) != NULL, "a small bucket buffer is refused, not overrun");
	ml_s3_uri_encode("/a b/c$d?e#f%g~h_i-j.k/ü", true, enc, sizeof(enc));
	is_str(enc, "/a%20b/c%24d%3Fe%23f%25g~h_i-j.k/%C3%BC", "URI encoding keeps unreserved and '/', encodes the rest");
	ml_s3_uri_encode("a/b", false, enc, sizeof(enc));
	is_str(enc, "a%2Fb", "'/' encoded when asked");
	ok(ml_s3_uri_encode("abc%", true, enc, 4) == 6 && strcmp(enc, "abc") == 0,
	   "encoding truncates to the buffer and returns the full length");
}

static void
test_checksums(void)
{
	char hex[65];

	/* SHA-256("") is 47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU= in base64 */
	ok(ml_s3_checksum_b64_to_hex("47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=", hex) &&
		   strcmp(hex, EMPTY_SHA) == 0,
	   "x-amz-checksum-sha256 of the empty object decodes to its hex digest");
	ok(ml_s3_checksum_b64_to_hex(" 47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU= ", hex), "surrounding blanks are allowed");
	ok(!ml_s3_checksum_b64_to_hex("47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU", hex), "missing padding is refused");
	ok(!ml_s3_checksum_b64_to_hex("47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFV=", hex), "non-zero trailing bits are refused");
	ok(!ml_s3_checksum_b64_to_hex("47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hS!FU=", hex), "a non-base64 character is refused");
	ok(!ml_s3_checksum_b64_to_hex("AAAA", hex), "a short digest is refused");
	ok(!ml_s3_checksum_b64_to_hex("47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=-3", hex),
	   "a composite (multipart) checksum is not a whole-object digest");
	ok(!ml_s3_checksum_b64_to_hex(NULL, hex), "NULL is refused");

	{
		char code[ML_S3_ERROR_CODE_MAX];

		ok(ml_s3_error_code("<?xml version=\"1.0\"?>\n<Error><Code>SignatureDoesNotMatch</Code><Message>x</Message></Error>",
							code, sizeof(code)) &&
			   strcmp(code, "SignatureDoesNotMatch") == 0,
		   "an S3 error answer's code is read");
		ok(!ml_s3_error_code("", code, sizeof(code)) && !ml_s3_error_code(NULL, code, sizeof(code)),
		   "no body (a HEAD's answer): no code");
		ok(!ml_s3_error_code("<Code>Access Denied</Code>", code, sizeof(code)), "a code with a blank is not taken");
		ok(!ml_s3_error_code("<Code>SignatureDoesNotMatch</Code>", code, 6), "a code longer than the room is not cut");
	}

	ml_sha256_hex("", 0, hex);
	is_str(hex, EMPTY_SHA, "sha256 of nothing");
}

static void
test_credentials(void)
{
	MlS3Credentials c;

	ok(ml_s3_parse_credentials("[default]\naws_access_key_id = AKID\n# c\naws_secret_access_key=SECRET\n", &c) == NULL &&
		   strcmp(c.access_key_id, "AKID") == 0 && strcmp(c.secret_access_key, "SECRET") == 0 && c.session_token[0] == '\0',
	   "an AWS shared credentials file parses");
	ok(ml_s3_parse_credentials("aws_access_key_id=A\r\naws_secret_access_key=S\r\naws_session_token=T\r\n", &c) == NULL &&
		   strcmp(c.secret_access_key, "S") == 0 && strcmp(c.session_token, "T") == 0,
	   "CRLF lines and a session token");
	ok(ml_s3_parse_credentials("[a]\naws_access_key_id=A\naws_secret_access_key=S\n[b]\naws_secret_access_key=X\n", &c) == NULL &&
		   strcmp(c.secret_access_key, "S") == 0,
	   "only the first profile is read");
	ok(ml_s3_parse_credentials("aws_access_key_id=A\n", &c) != NULL && c.access_key_id[0] == '\0',
	   "a missing secret is refused and nothing is kept");
	ok(ml_s3_parse_credentials("aws_access_key_id=A B\naws_secret_access_key=S\n", &c) != NULL, "a blank inside a value is refused");
	ok(ml_s3_parse_credentials("just a secret\n", &c) != NULL, "a line without '=' is refused");
	{
		const char *why = ml_s3_parse_credentials("aws_access_key_id=A\naws_secret_access_key=TOPSECRET\x01\n", &c);

		ok(why != NULL && strstr(why, "TOPSECRET") == NULL, "the reason never quotes a value");
	}
}

int
main(int argc, char **argv)
{
	unit_tap_begin(argc, argv);
	test_sigv4();
	test_uri();
	test_checksums();
	test_credentials();
	/* the plan line comes last (this output is appended to another TAP stream) */
	return unit_tap_end();
}
