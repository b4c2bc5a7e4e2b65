"""The web config file (exporter-toolkit's format): what it turns into, and one clear line, with
no secret in it, for every way it can be wrong."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization

from mirrorlag.errors import ConfigError
from mirrorlag.exporters.web_config import load_web_config
from tests.web_pki import PASSWORD, USER, WebPki, make_web_pki, password_hash


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> WebPki:
    return make_web_pki(tmp_path_factory.mktemp("web") / "pki")


def write(pki: WebPki, text: str, name: str = "web.yml") -> Path:
    path = pki.directory.parent / name
    path.write_text(text)
    return path


def error_of(path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        load_web_config(path)
    return str(info.value)


TLS = "tls_server_config:\n  cert_file: pki/server.pem\n  key_file: pki/server.key\n"


def test_an_empty_file_is_plain_http_without_auth(pki):
    web = load_web_config(write(pki, ""))
    assert (web.tls, web.auth, web.headers) == (None, None, ())


def test_tls_with_relative_paths_read_from_the_files_directory_and_exporter_toolkits_defaults(pki, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # not where the file is
    web = load_web_config(write(pki, TLS))
    assert web.tls is not None and web.auth is None
    context = web.tls.context
    assert (context.minimum_version, context.maximum_version) == (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3)
    assert context.verify_mode == ssl.CERT_NONE and context.options & ssl.OP_CIPHER_SERVER_PREFERENCE
    assert web.describe() == "TLS, client certificates: NoClientCert"


def test_client_auth_types_map_to_verify_modes(pki):
    for kind, mode in [("RequireAndVerifyClientCert", ssl.CERT_REQUIRED), ("VerifyClientCertIfGiven", ssl.CERT_OPTIONAL)]:
        web = load_web_config(write(pki, TLS + f"  client_auth_type: {kind}\n  client_ca_file: {pki.ca}\n"))
        assert web.tls.context.verify_mode == mode and web.tls.client_auth == kind
    web = load_web_config(write(pki, TLS + "  client_auth_type: RequestClientCert\n"))
    assert web.tls.context.verify_mode == ssl.CERT_NONE  # Go checks nothing with it either


def test_inline_pem_versions_ciphers_headers_and_users(pki):
    indent = lambda p: "\n".join("    " + line for line in p.read_text().splitlines())  # noqa: E731
    web = load_web_config(write(pki, (
        "tls_server_config:\n"
        f"  cert: |\n{indent(pki.server[0])}\n  key: |\n{indent(pki.server[1])}\n"
        "  min_version: TLS13\n  max_version: TLS13\n"
        "  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_AES_128_GCM_SHA256]\n"
        "  prefer_server_cipher_suites: false\n"
        "http_server_config:\n  http2: false\n  headers:\n    X-Frame-Options: deny\n    X-XSS-Protection: ''\n"
        f"basic_auth_users:\n  {USER}: {password_hash()}\n")))
    context = web.tls.context
    assert context.minimum_version == ssl.TLSVersion.TLSv1_3 and not context.options & ssl.OP_CIPHER_SERVER_PREFERENCE
    tls12 = [c["name"] for c in context.get_ciphers() if c["protocol"] == "TLSv1.2"]
    assert tls12 == ["ECDHE-ECDSA-AES128-GCM-SHA256"]
    assert web.headers == (("X-Frame-Options", "deny"),)  # a blank value is unset
    assert web.auth is not None and web.describe() == "TLS, client certificates: NoClientCert, basic auth"


def test_rate_limit_off_is_accepted(pki):
    assert load_web_config(write(pki, "rate_limit:\n  interval: 0s\n  burst: 0\n")).tls is None


def test_basic_auth_alone_keeps_plain_http(pki):
    web = load_web_config(write(pki, f"basic_auth_users:\n  {USER}: '{password_hash()}'\n"))
    assert web.tls is None and web.auth is not None


@pytest.mark.parametrize("text,expected", [
    ("tls_server_config:\n  cert_fiel: x\n", "web.yml: tls_server_config.cert_fiel: unknown key; did you mean tls_server_config.cert_file?"),
    ("tls_config:\n  cert_file: x\n", "web.yml: tls_config: unknown key; did you mean tls_server_config?"),
    ("basic_auth_users: [a, b]\n", "web.yml: basic_auth_users: must be a mapping"),
    ("- a\n", "web.yml: must be a YAML mapping"),
    ("tls_server_config:\n  cert_file: [\n", "web.yml:3: not valid YAML"),
    ("tls_server_config:\n  key_file: pki/server.key\n", "web.yml: tls_server_config: missing one of cert or cert_file"),
    ("tls_server_config:\n  cert_file: pki/nope.pem\n  key_file: pki/server.key\n",
     "web.yml: tls_server_config.cert_file: cannot read {dir}/pki/nope.pem: No such file or directory"),
    ("tls_server_config:\n  cert_file: pki/server.key\n  key_file: pki/server.key\n",
     "web.yml: tls_server_config: {dir}/pki/server.key: no PEM certificate in it"),
    ("tls_server_config:\n  cert_file: pki/server.pem\n  key_file: pki/server.pem\n",
     "web.yml: tls_server_config: {dir}/pki/server.pem: no PEM private key in it"),
    ("tls_server_config:\n  cert_file: pki/server.pem\n  key_file: pki/client.key\n",
     "web.yml: tls_server_config: {dir}/pki/client.key: the key does not match the certificate {dir}/pki/server.pem"),
    (TLS + "  min_version: TLS14\n", "web.yml: tls_server_config.min_version: unknown TLS version 'TLS14'"),
    (TLS + "  min_version: TLS13\n  max_version: TLS12\n", "web.yml: tls_server_config.min_version: TLS13 is above max_version TLS12"),
    (TLS + "  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA265]\n",
     "did you mean TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256?"),
    (TLS + "  client_auth_type: RequireAnyClientCert\n", "RequireAnyClientCert is not supported by mirrorlag"),
    (TLS + "  client_auth_type: Sometimes\n", "tls_server_config.client_auth_type: unknown value 'Sometimes'"),
    (TLS + "  client_auth_type: RequireAndVerifyClientCert\n", "RequireAndVerifyClientCert needs client_ca_file"),
    (TLS + "  client_ca_file: pki/ca.pem\n", "a client CA is set but client_auth_type is NoClientCert"),
    (TLS + "  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: pki/server.key\n",
     "tls_server_config.client_ca_file: {dir}/pki/server.key: no PEM certificate in it"),
    (TLS + "  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: pki/ca.pem\n  client_allowed_sans: [a]\n",
     "client_allowed_sans: needs client_auth_type RequireAndVerifyClientCert"),
    (TLS + "  curve_preferences: [X25519]\n", "tls_server_config.curve_preferences: not supported by mirrorlag"),
    ("rate_limit:\n  interval: 1s\n  burst: 5\n", "web.yml: rate_limit: not supported by mirrorlag"),
    ("http_server_config:\n  headers:\n    X-Powered-By: me\n", "http_server_config.headers.X-Powered-By: this header cannot be set"),
    ("http_server_config:\n  headers:\n    X-Frame-Options: allow\n", "X-Frame-Options: must be one of deny, sameorigin"),
])
def test_each_mistake_is_one_line_naming_file_and_key(pki, text, expected):
    message = error_of(write(pki, text))
    assert "\n" not in message
    assert expected.format(dir=pki.directory.parent) in message, message


def test_a_bad_hash_names_the_user_never_the_hash(pki):
    good = password_hash()
    for bad in ["plaintext-password", good[:-1], good.replace("$2y$04$", "$2y$99$"), "$1$abc$" + good[7:]]:
        message = error_of(write(pki, f"basic_auth_users:\n  {USER}: '{bad}'\n  other: '{good}'\n"))
        assert message.startswith(f"{pki.directory.parent}/web.yml: basic_auth_users.{USER}: ")
        assert bad not in message and good not in message and PASSWORD not in message


def test_an_encrypted_key_is_named_and_never_prompted_for(pki):
    key = serialization.load_pem_private_key(pki.server[1].read_bytes(), None)
    encrypted = pki.directory / "server.enc.key"
    encrypted.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.BestAvailableEncryption(b"Key-Pw-1")))
    message = error_of(write(pki, "tls_server_config:\n  cert_file: pki/server.pem\n  key_file: pki/server.enc.key\n"))
    assert f"{encrypted}: the key is encrypted" in message


def test_an_inline_key_never_appears_in_an_error(pki):
    key = pki.server[1].read_text()
    broken = key.replace("\n", "\n    ")[:-30]  # cut short: not a key any more
    message = error_of(write(pki, f"tls_server_config:\n  cert_file: pki/server.pem\n  key: |\n    {broken}\n"))
    assert "tls_server_config.key (inline): no PEM private key in it" in message
    assert all(line not in message for line in key.splitlines()[1:-1])


def test_an_unreadable_file_and_bad_yaml_say_so_without_the_text(pki, tmp_path):
    assert "cannot read the web config file: No such file or directory" in error_of(tmp_path / "missing.yml")
    secret = "hunter2-do-not-echo"
    message = error_of(write(pki, f"basic_auth_users:\n  {USER}: {secret}\n\t bad: [\n"))
    assert secret not in message and message.startswith(f"{pki.directory.parent}/web.yml:")
