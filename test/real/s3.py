#!/usr/bin/env python3
"""The real-peers suite's S3 server (moto in server mode, authentication on).

Runs with the moto venv's python (test/real/build.sh installs boto3 with it):

    s3.py setup ENDPOINT CREDENTIALS-FILE
        create IAM user mlplat with an access key (moto answers the first
        three requests unauthenticated: INITIAL_NO_AUTH_ACTION_COUNT=3, set
        by real_s3_start), write the key as an AWS credentials file; from
        then on every request must carry a valid SigV4 signature.
    s3.py put ENDPOINT CREDENTIALS-FILE s3://BUCKET/KEY CONTENT
        create the bucket if needed, upload CONTENT with a SHA-256 checksum,
        print the SHA-256 (hex) that S3 now reports for it.
"""
import base64
import configparser
import hashlib
import sys

import boto3
import botocore.exceptions


def client(endpoint, creds, service="s3"):
    c = configparser.ConfigParser()
    c.read(creds)
    return boto3.client(service, endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id=c["default"]["aws_access_key_id"],
                        aws_secret_access_key=c["default"]["aws_secret_access_key"])


def setup(endpoint, creds):
    iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1",
                       aws_access_key_id="bootstrap", aws_secret_access_key="bootstrap")
    iam.create_user(UserName="mlplat")
    key = iam.create_access_key(UserName="mlplat")["AccessKey"]
    iam.put_user_policy(UserName="mlplat", PolicyName="objects", PolicyDocument=(
        '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"s3:*","Resource":"*"}]}'))
    with open(creds, "w") as f:
        f.write(f"[default]\naws_access_key_id = {key['AccessKeyId']}\n"
                f"aws_secret_access_key = {key['SecretAccessKey']}\n")


def put(endpoint, creds, uri, content):
    bucket, key = uri[len("s3://"):].split("/", 1)
    s3 = client(endpoint, creds)
    try:
        s3.create_bucket(Bucket=bucket)
    except botocore.exceptions.ClientError as e:
        if e.response["Error"]["Code"] not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
            raise
    s3.put_object(Bucket=bucket, Key=key, Body=content.encode(), ChecksumAlgorithm="SHA256")
    head = s3.head_object(Bucket=bucket, Key=key, ChecksumMode="ENABLED")
    got = base64.b64decode(head["ChecksumSHA256"]).hex()
    assert got == hashlib.sha256(content.encode()).hexdigest(), (got, content)
    print(got)


if __name__ == "__main__":
    if sys.argv[1] == "setup":
        setup(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "put":
        put(*sys.argv[2:6])
    else:
        sys.exit("usage: s3.py setup|put ...")
