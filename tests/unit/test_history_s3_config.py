"""mirrorlag.history.upload.s3.*: parsing, errors that name file:line:key and never a secret, the
s3fs options they become, and the secrets kept out of logs and error texts."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from mirrorlag.config.settings import S3UploadSettings
from mirrorlag.history import History
from mirrorlag.history.objectstore import PART_BYTES, redactor, storage_options
from tests.unit.test_history_config import BASE, NEXT, at, error, load

SECRET, TOKEN = "S3-Secret-Value-77d1", "S3-Token-Value-40ae"
UPLOAD = "mirrorlag.history.dir = /x\nmirrorlag.history.upload.uri = s3://bucket/history\n"
KEYS = (
    "mirrorlag.history.upload.s3.endpoint.url = http://minio.internal:9000\n"
    "mirrorlag.history.upload.s3.region = eu-west-1\n"
    "mirrorlag.history.upload.s3.access.key.id = AKIDEXAMPLE\n"
    f"mirrorlag.history.upload.s3.secret.access.key = {SECRET}\n"
    f"mirrorlag.history.upload.s3.session.token = {TOKEN}\n"
    "mirrorlag.history.upload.s3.path.style.access = true\n"
)


def test_every_s3_key(tmp_path: Path) -> None:
    s3 = load(tmp_path, BASE + UPLOAD + KEYS).history.upload_s3
    assert s3 == S3UploadSettings(endpoint_url="http://minio.internal:9000", region="eu-west-1",
                                  access_key_id="AKIDEXAMPLE", secret_access_key=SECRET, session_token=TOKEN,
                                  path_style=True)
    assert SECRET not in repr(s3) and TOKEN not in repr(s3) and s3.secrets == (SECRET, TOKEN)


def test_without_s3_keys_the_sdk_defaults_apply(tmp_path: Path) -> None:
    assert load(tmp_path, BASE + UPLOAD).history.upload_s3 is None
    assert load(tmp_path, BASE + UPLOAD.replace("s3://", "s3a://")
                + "mirrorlag.history.upload.s3.region = us-east-2\n").history.upload_s3.region == "us-east-2"


def test_storage_options() -> None:
    s3 = S3UploadSettings(endpoint_url="http://minio:9000", region="eu-west-1", access_key_id="AK",
                          secret_access_key=SECRET, session_token=TOKEN, path_style=True)
    assert storage_options("s3://b/h", s3, environ={}) == {"s3": {
        "default_block_size": PART_BYTES,
        "config_kwargs": {"connect_timeout": 10, "retries": {"mode": "standard", "max_attempts": 3},
                          "s3": {"addressing_style": "path"}},
        "endpoint_url": "http://minio:9000", "client_kwargs": {"region_name": "eu-west-1"},
        "key": "AK", "secret": SECRET, "token": TOKEN,
    }}
    # The SDK's own chain: nothing but the part size, timeouts and retries; the variables win.
    assert storage_options("s3a://b/h", None, environ={"AWS_MAX_ATTEMPTS": "10"}) == {
        "s3a": {"default_block_size": PART_BYTES, "config_kwargs": {"connect_timeout": 10}}}
    assert list(storage_options("simplecache::s3://b/h", None, environ={})) == ["s3"]
    assert storage_options("file:///tmp/h", s3) == {} and storage_options("gs://b/h", None) == {}


@pytest.mark.parametrize(
    ("text", "key", "message"),
    [
        # A credential that nothing uses is an error, not a silence.
        ("mirrorlag.history.dir = /x\n", "access.key.id", "applies only to an s3:// mirrorlag.history.upload.uri"),
        ("mirrorlag.history.dir = /x\nmirrorlag.history.upload.uri = file:///up\n", "secret.access.key",
         "applies only to an s3://"),
        (UPLOAD, "access.key.id", "needs mirrorlag.history.upload.s3.secret.access.key too"),
        (UPLOAD, "secret.access.key", "needs mirrorlag.history.upload.s3.access.key.id too"),
        (UPLOAD, "session.token", "needs mirrorlag.history.upload.s3.access.key.id and"),
    ],
)
def test_incomplete_or_misplaced_credentials(tmp_path: Path, text: str, key: str, message: str) -> None:
    value = {"access.key.id": "AKID", "secret.access.key": SECRET, "session.token": TOKEN}[key]
    err = error(tmp_path, BASE + f"mirrorlag.history.upload.s3.{key} = {value}\n" + text)
    shown = at(err, tmp_path, NEXT, f"mirrorlag.history.upload.s3.{key}")
    assert message in shown and SECRET not in shown and TOKEN not in shown


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("endpoint.url", "minio:9000", "expected http(s)://host[:port], got 'minio:9000'"),
        ("endpoint.url", "ftp://minio", "expected http(s)://host[:port]"),
        ("endpoint.url", "http://minio:99999", "with a port in 0..65535"),
        ("endpoint.url", f"http://me:{SECRET}@minio:9000", "without credentials"),
        ("path.style.access", "yes", "expected true or false, got 'yes'"),
    ],
)
def test_bad_values_name_file_line_and_key(tmp_path: Path, key: str, value: str, message: str) -> None:
    err = error(tmp_path, BASE + f"mirrorlag.history.upload.s3.{key} = {value}\n" + UPLOAD)
    shown = at(err, tmp_path, NEXT, f"mirrorlag.history.upload.s3.{key}")
    assert message in shown and SECRET not in shown


def test_a_per_flow_secret_is_ignored_with_a_warning_that_never_shows_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    text = BASE + UPLOAD + KEYS + f"A->B.mirrorlag.history.upload.s3.secret.access.key = {TOKEN}x\n"
    assert load(tmp_path, text).history.upload_s3.secret_access_key == SECRET
    (warning,) = [r.getMessage() for r in caplog.records if "is ignored" in r.getMessage()]
    assert "mirrorlag.history.upload.s3.secret.access.key = ***" in warning
    assert SECRET not in warning and TOKEN not in warning


def test_redactor_masks_configured_and_environment_secrets() -> None:
    s3 = S3UploadSettings(access_key_id="AK", secret_access_key=SECRET, session_token=TOKEN)
    redact = redactor(s3, environ={"AWS_SECRET_ACCESS_KEY": "env-secret-1", "AWS_SESSION_TOKEN": "env-token-2",
                                   "AWS_ACCESS_KEY_ID": "AKIDSHOWN", "AWS_SECURITY_TOKEN": ""})
    text = f"denied: {SECRET} {TOKEN} env-secret-1 env-token-2 AKIDSHOWN"
    assert redact(text) == "denied: *** *** *** *** AKIDSHOWN"


def test_an_s3_upload_holds_botocore_logs_at_info(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """botocore's DEBUG log prints request headers, X-Amz-Security-Token included."""
    for name in ("botocore", "aiobotocore"):
        monkeypatch.setattr(logging.getLogger(name), "level", logging.NOTSET)
    monkeypatch.setattr(logging.getLogger(), "level", logging.DEBUG)
    h = load(tmp_path, BASE + f"mirrorlag.history.dir = {tmp_path}/h\n"
             "mirrorlag.history.upload.uri = s3://bucket/history\n").history
    History(h)
    assert logging.getLogger("botocore.endpoint").getEffectiveLevel() == logging.INFO
    assert logging.getLogger("aiobotocore.endpoint").getEffectiveLevel() == logging.INFO


def test_credentials_in_an_s3_url_are_refused_without_showing_them(tmp_path: Path) -> None:
    err = error(tmp_path, BASE + f"mirrorlag.history.upload.uri = s3://AKID:{SECRET}@bucket/h\n"
                "mirrorlag.history.dir = /x\n")
    shown = at(err, tmp_path, NEXT, "mirrorlag.history.upload.uri")
    assert "carries no credentials" in shown and SECRET not in shown
