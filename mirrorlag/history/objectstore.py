"""s3:// uploads through s3fs: storage options, leftovers of interrupted uploads, secrets out of sight.

- Credentials, endpoint and region: `mirrorlag.history.upload.s3.*` where set, else botocore's own
  chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, AWS_ENDPOINT_URL(_S3),
  AWS_REGION, ~/.aws, web identity, instance metadata), exactly as the AWS CLI reads them.
- Parts of 5 MiB, S3's minimum: a segment below that is one PutObject (atomic), a larger one a
  multipart upload holding at most one part in memory. Only close() completes it; the uploader
  discards (aborts) an interrupted one, and aborts what a dead process or a lost connection left
  for the same key before it tries again.
- Retries: the uploader retries a failed segment itself, with backoff and counted, so the SDK only
  absorbs blips (botocore's standard mode, 3 attempts, unless AWS_RETRY_MODE / AWS_MAX_ATTEMPTS
  say otherwise); a 10 s connect timeout so that a blackholed endpoint fails in seconds.
- botocore's DEBUG log prints request headers, X-Amz-Security-Token included: its loggers are held
  at INFO, and every error text the uploader logs or shows in /status has the secrets masked.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Callable, Mapping

from mirrorlag.config.settings import S3UploadSettings

log = logging.getLogger("mirrorlag.history")

S3_PROTOCOLS = frozenset({"s3", "s3a"})
PART_BYTES = 5 * 2**20
CONNECT_TIMEOUT_S = 10
# Environment variables that hold secrets botocore may read on its own.
SECRET_VARIABLES = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN")
SDK_LOGGERS = ("botocore", "aiobotocore")


def s3_protocol(uri: str) -> str | None:
    """The s3 protocol (s3 or s3a) of a possibly chained fsspec URL, None when it has none."""
    from fsspec.core import split_protocol

    return next((p for part in uri.split("::") if (p := split_protocol(part)[0]) in S3_PROTOCOLS), None)


def storage_options(uri: str, s3: S3UploadSettings | None, environ: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """fsspec keyword arguments for `url_to_fs(uri, **...)`: keyed by protocol, so they reach the
    S3 layer of a chained URL too. Empty for a URL without s3."""
    protocol = s3_protocol(uri)
    if protocol is None:
        return {}
    config: dict[str, Any] = {"connect_timeout": CONNECT_TIMEOUT_S}
    if not {"AWS_RETRY_MODE", "AWS_MAX_ATTEMPTS"} & environ.keys():
        config["retries"] = {"mode": "standard", "max_attempts": 3}
    options: dict[str, Any] = {"default_block_size": PART_BYTES, "config_kwargs": config}
    if s3 is not None:
        if s3.endpoint_url:
            options["endpoint_url"] = s3.endpoint_url
        if s3.region:
            options["client_kwargs"] = {"region_name": s3.region}
        if s3.access_key_id:
            options.update(key=s3.access_key_id, secret=s3.secret_access_key, token=s3.session_token)
        if s3.path_style:
            config["s3"] = {"addressing_style": "path"}
    return {protocol: options}


def quiet_sdk_logs() -> None:
    """Hold botocore's loggers at INFO or above, whatever --log-level says (see the module doc)."""
    for name in SDK_LOGGERS:
        logger = logging.getLogger(name)
        if logger.getEffectiveLevel() < logging.INFO:
            logger.setLevel(logging.INFO)


def redactor(s3: S3UploadSettings | None, environ: Mapping[str, str] = os.environ) -> Callable[[str], str]:
    """A function that masks every secret the S3 client may hold in a text (an error message)."""
    secrets = {v for v in (*(s3.secrets if s3 else ()), *(environ.get(k, "") for k in SECRET_VARIABLES)) if len(v) >= 4}

    def redact(text: str) -> str:
        for secret in secrets:
            text = text.replace(secret, "***")
        return text

    return redact


def abort_incomplete(fs: Any, path: str) -> int:
    """Abort the multipart uploads left open for `path` (an interrupted attempt, a killed process):
    they are invisible but billed until a lifecycle rule removes them. Best effort: needs
    s3:ListBucketMultipartUploads; returns how many it aborted."""
    if not hasattr(fs, "call_s3") or not hasattr(fs, "split_path"):
        return 0  # not s3fs
    bucket, key, _ = fs.split_path(path)
    try:
        found = fs.call_s3("list_multipart_uploads", Bucket=bucket, Prefix=key).get("Uploads", [])
        stale = [u["UploadId"] for u in found if u.get("Key") == key]
        for upload_id in stale:
            fs.call_s3("abort_multipart_upload", Bucket=bucket, Key=key, UploadId=upload_id)
    except Exception as err:  # e.g. AccessDenied: the upload itself may still work
        log.debug("history: cannot abort earlier multipart uploads of %s: %s", path, type(err).__name__)
        return 0
    return len(stale)
