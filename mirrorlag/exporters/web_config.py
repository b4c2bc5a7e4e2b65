"""The listener's web configuration file (`mirrorlag run --web.config.file`): the format of the
Prometheus exporter-toolkit (docs/web-configuration.md there), so the file that secures a
node_exporter secures mirrorlag: TLS, client certificates, basic auth with bcrypt hashes, extra
response headers. Relative paths are read from the file's own directory, unknown keys are an
error, as there.

Checked whole at start (a mistake stops `mirrorlag run` with one line). While running, a change
to the file or to a file it names is picked up by the next connection (looked for at most every
few seconds), so renewed certificates need no restart, as exporter-toolkit rereads it per
request; a changed file that does not load leaves the config in force and is logged. Not supported, each a clear error rather than a silent difference:
`client_auth_type: RequireAnyClientCert` (Python's ssl checks every certificate it asks for
against a CA), `curve_preferences` and `rate_limit`; `cipher_suites` names TLS 1.2 suites only
(TLS 1.3's are OpenSSL's defaults, as Go ignores the list for 1.3), `http_server_config.http2`
is accepted and has no effect (HTTP/1.1 only). `RequestClientCert` is `NoClientCert` here:
neither checks a certificate.
"""

from __future__ import annotations

import difflib
import ipaddress
import logging
import os
import re
import ssl
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from mirrorlag.errors import ConfigError
from mirrorlag.exporters.basic_auth import BasicAuth

log = logging.getLogger(__name__)

_TLS_KEYS = ("cert", "key", "client_ca", "cert_file", "key_file", "client_auth_type", "client_ca_file",
             "client_allowed_sans", "min_version", "max_version", "cipher_suites",
             "prefer_server_cipher_suites", "curve_preferences")
# Any of these switches TLS on (exporter-toolkit's TLSConfig.IsEnabled); min_version alone does not.
_TLS_ENABLING = ("cert", "key", "client_ca", "cert_file", "key_file", "client_ca_file", "client_auth_type")
_SECTIONS = {"tls_server_config": _TLS_KEYS, "http_server_config": ("http2", "headers"),
             "basic_auth_users": None, "rate_limit": ("interval", "burst")}
_UNSUPPORTED = {"tls_server_config.curve_preferences": "Python's ssl sets no curve list",
                "rate_limit": "put a reverse proxy in front for that"}

_VERSIONS = {"TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1,
             "TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
# client_auth_type -> (verify mode, needs a client CA); RequestClientCert checks nothing in Go either.
_CLIENT_AUTH = {"NoClientCert": (ssl.CERT_NONE, False), "RequestClientCert": (ssl.CERT_NONE, False),
                "VerifyClientCertIfGiven": (ssl.CERT_OPTIONAL, True),
                "RequireAndVerifyClientCert": (ssl.CERT_REQUIRED, True)}
# Go's names (crypto/tls CipherSuites(), IANA's) of the TLS <= 1.2 suites -> OpenSSL's.
_CIPHERS = {
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA", "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256", "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA", "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
}
_TLS13_CIPHERS = ("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256")
# The headers exporter-toolkit lets a file set, with the values it allows (None: any).
_HEADERS: dict[str, tuple[str, ...] | None] = {
    "Strict-Transport-Security": None, "X-Content-Type-Options": ("nosniff",),
    "X-Frame-Options": ("deny", "sameorigin"), "X-XSS-Protection": None, "Content-Security-Policy": None}
_BCRYPT = re.compile(rb"\$2[abxy]\$(\d\d)\$[./A-Za-z0-9]{53}")


@dataclass(frozen=True)
class ServerTls:
    context: ssl.SSLContext
    client_auth: str  # the client_auth_type, for the start-up log line
    allowed_sans: frozenset[str] | None = None  # a client certificate must name one of these

    def peer_allowed(self, conn: ssl.SSLSocket) -> bool:
        """client_allowed_sans: whether the verified client certificate names an allowed SAN."""
        if self.allowed_sans is None:
            return True
        cert = conn.getpeercert() or {}
        return any(_san_value(kind, value) in self.allowed_sans for kind, value in cert.get("subjectAltName", ()))


@dataclass(frozen=True)
class WebConfig:
    path: Path
    tls: ServerTls | None = None
    auth: BasicAuth | None = None
    headers: tuple[tuple[str, str], ...] = field(default=())
    files: tuple[Path, ...] = ()  # the config file and every file it names, watched for changes

    def describe(self) -> str:
        """How the listener is secured, for the start-up log line (no secrets)."""
        parts = [f"TLS, client certificates: {self.tls.client_auth}" if self.tls else "no TLS"]
        if self.auth is not None:
            parts.append("basic auth")
        return ", ".join(parts)


def load_web_config(path: str | Path) -> WebConfig:
    """The web config file, checked whole: every file it names is loaded now, so a bad
    certificate, key or hash stops `mirrorlag run` at start with one line."""
    path = Path(path)
    doc = _read_yaml(path)
    _check_keys(path, doc)
    base = path.parent
    tls_doc = doc.get("tls_server_config") or {}
    http_doc = doc.get("http_server_config") or {}
    tls = _server_tls(path, base, tls_doc) if any(tls_doc.get(k) for k in _TLS_ENABLING) else None
    named = [base / tls_doc[k] for k in ("cert_file", "key_file", "client_ca_file") if tls and tls_doc.get(k)]
    return WebConfig(
        path=path,
        tls=tls,
        auth=_basic_auth(path, doc.get("basic_auth_users") or {}),
        headers=_headers(path, http_doc.get("headers") or {}),
        files=(path, *named),
    )


RELOAD_CHECK_S = 5.0


class LiveWebConfig:
    """The web config in force: reloaded when the file or one it names changes (a new inode,
    size or mtime: Kubernetes swaps a Secret's files by a symlink), looked for at most every
    `check_every_s`, from the thread of a new connection or request."""

    def __init__(self, web: WebConfig, check_every_s: float = RELOAD_CHECK_S) -> None:
        self.web, self.check_every_s = web, check_every_s
        self._stamp = _stamp(web.files)
        self._failed: tuple | None = None  # the stamp of files that did not load, said once
        self._checked = time.monotonic()
        self._lock = threading.Lock()

    def current(self) -> WebConfig:
        if time.monotonic() - self._checked < self.check_every_s:
            return self.web
        with self._lock:
            if time.monotonic() - self._checked < self.check_every_s:
                return self.web  # another thread looked meanwhile
            self._checked = time.monotonic()
            stamp = _stamp(self.web.files)
            if stamp == self._stamp or stamp == self._failed:
                return self.web
            try:
                web = load_web_config(self.web.path)
            except ConfigError as exc:
                self._failed = stamp
                log.error("web config changed but does not load, the one loaded before stays in force: %s", exc)
                return self.web
            self.web, self._stamp, self._failed = web, _stamp(web.files), None
            log.info("web config reloaded from %s (%s)", web.path, web.describe())
            return web


def _stamp(files: tuple[Path, ...]) -> tuple:
    def one(path: Path) -> tuple | None:
        try:
            st = path.stat()
        except OSError:
            return None
        return st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns

    return tuple(one(path) for path in files)



def _error(path: Path, key: str | None, message: str) -> ConfigError:
    return ConfigError(message, file=path, key=key)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise _error(path, None, f"cannot read the web config file: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise _error(path, None, "not a text file") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:  # its problem and line only: its snippet could hold a secret
        line = exc.problem_mark.line + 1 if exc.problem_mark else None
        raise ConfigError(f"not valid YAML: {exc.problem}", file=path, line=line) from None
    except yaml.YAMLError:
        raise _error(path, None, "not valid YAML") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise _error(path, None, "must be a YAML mapping (tls_server_config, basic_auth_users, ...)")
    return doc


def _check_keys(path: Path, doc: dict[str, Any]) -> None:
    def unknown(name: str, known: tuple[str, ...] | list[str], prefix: str = "") -> ConfigError:
        close = difflib.get_close_matches(str(name), known, n=1)
        return _error(path, f"{prefix}{name}", "unknown key" + (f"; did you mean {prefix}{close[0]}?" if close else ""))

    for section, value in doc.items():
        if section not in _SECTIONS:
            raise unknown(section, list(_SECTIONS))
        if value is None:
            continue
        if not isinstance(value, dict):
            raise _error(path, str(section), "must be a mapping")
        keys = _SECTIONS[section]
        for key in value if keys is not None else ():
            if key not in keys:
                raise unknown(key, keys, f"{section}.")
            if f"{section}.{key}" in _UNSUPPORTED:
                raise _error(path, f"{section}.{key}", f"not supported by mirrorlag ({_UNSUPPORTED[f'{section}.{key}']})")
        if section == "rate_limit" and str(value.get("interval") or 0) in ("0", "0s"):
            continue  # interval 0 is the rate limiter off
        if section in _UNSUPPORTED:
            raise _error(path, section, f"not supported by mirrorlag ({_UNSUPPORTED[section]})")


def _string(path: Path, section: dict[str, Any], key: str, where: str) -> str | None:
    value = section.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise _error(path, f"{where}.{key}", "must be a string")
    return value


def _server_tls(path: Path, base: Path, doc: dict[str, Any]) -> ServerTls:
    def text(key: str) -> str | None:
        return _string(path, doc, key, "tls_server_config")

    def file(key: str) -> Path | None:
        value = text(key)
        return base / value if value is not None else None  # an absolute value stays as it is

    where = "tls_server_config."
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    cert = _material(path, where + "cert", file("cert_file"), text("cert"), "cert_file")
    key = _material(path, where + "key", file("key_file"), text("key"), "key_file")
    _load_pair(path, context, cert, key)

    versions = [text("min_version") or "TLS12", text("max_version") or "TLS13"]
    for name, value in zip(("min_version", "max_version"), versions):
        if value not in _VERSIONS:
            raise _error(path, where + name, f"unknown TLS version {value!r} (known: {', '.join(_VERSIONS)})")
    if _VERSIONS[versions[0]] > _VERSIONS[versions[1]]:
        raise _error(path, where + "min_version", f"{versions[0]} is above max_version {versions[1]}")
    context.minimum_version, context.maximum_version = _VERSIONS[versions[0]], _VERSIONS[versions[1]]

    suites = doc.get("cipher_suites") or []
    if not isinstance(suites, list) or not all(isinstance(s, str) for s in suites):
        raise _error(path, where + "cipher_suites", "must be a list of cipher suite names")
    for suite in suites:
        if suite not in _CIPHERS and suite not in _TLS13_CIPHERS:
            close = difflib.get_close_matches(suite, list(_CIPHERS), n=1)
            raise _error(path, where + "cipher_suites", f"unknown cipher suite {suite!r}"
                         + (f"; did you mean {close[0]}?" if close else ""))
    if any(s in _CIPHERS for s in suites):
        context.set_ciphers(":".join(_CIPHERS[s] for s in suites if s in _CIPHERS))
    prefer = doc.get("prefer_server_cipher_suites", True)
    if not isinstance(prefer, bool):
        raise _error(path, where + "prefer_server_cipher_suites", "must be true or false")
    if prefer:
        context.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    else:
        context.options &= ~ssl.OP_CIPHER_SERVER_PREFERENCE

    client_auth = text("client_auth_type") or "NoClientCert"
    if client_auth in ("RequireAnyClientCert", "RequireClientCert"):
        raise _error(path, where + "client_auth_type", f"{client_auth} is not supported by mirrorlag (Python's ssl "
                     "verifies every client certificate it asks for): use RequireAndVerifyClientCert with client_ca_file")
    if client_auth not in _CLIENT_AUTH:
        raise _error(path, where + "client_auth_type", f"unknown value {client_auth!r} (known: {', '.join(_CLIENT_AUTH)})")
    verify_mode, needs_ca = _CLIENT_AUTH[client_auth]
    ca_file, ca_text = file("client_ca_file"), text("client_ca")
    if (ca_file or ca_text) and not needs_ca:
        raise _error(path, where + "client_ca_file", f"a client CA is set but client_auth_type is {client_auth}: "
                     "set it to RequireAndVerifyClientCert (or VerifyClientCertIfGiven)")
    if needs_ca:
        if not (ca_file or ca_text):
            raise _error(path, where + "client_auth_type", f"{client_auth} needs client_ca_file (the CA that signs client certificates)")
        ca = _material(path, where + "client_ca", ca_file, ca_text, "client_ca_file")
        _load_client_ca(path, where + ("client_ca_file" if ca_file else "client_ca"), context, ca)
    context.verify_mode = verify_mode

    sans = doc.get("client_allowed_sans")
    allowed = None
    if sans is not None:
        if not isinstance(sans, list) or not all(isinstance(s, str) for s in sans):
            raise _error(path, where + "client_allowed_sans", "must be a list of strings")
        if client_auth != "RequireAndVerifyClientCert":
            raise _error(path, where + "client_allowed_sans", "needs client_auth_type RequireAndVerifyClientCert")
        allowed = frozenset(_normal_ip(s) for s in sans)
    context.set_alpn_protocols(["http/1.1"])
    return ServerTls(context, client_auth, allowed)


@dataclass(frozen=True)
class _Material:
    """A PEM from a file or from the config itself (inline), with what to call it in errors."""

    data: bytes
    name: str  # a path, or "<key> (inline)"


def _material(path: Path, key: str, file: Path | None, inline: str | None, file_key: str) -> _Material:
    if file is not None and inline is not None:
        raise _error(path, key, f"set {key.rsplit('.', 1)[1]} or {file_key}, not both")
    if inline is not None:
        return _Material(inline.encode(), f"{key} (inline)")
    if file is None:
        raise _error(path, key.rsplit(".", 1)[0], f"missing one of {key.rsplit('.', 1)[1]} or {file_key}")
    try:
        return _Material(file.read_bytes(), str(file))
    except OSError as exc:
        raise _error(path, key.rsplit(".", 1)[0] + "." + file_key, f"cannot read {file}: {exc.strerror}") from None


def _load_pair(path: Path, context: ssl.SSLContext, cert: _Material, key: _Material) -> None:
    """The certificate and key, loaded from memory (Linux memfd: an inline key never touches a
    disk), each failure said in words, never OpenSSL's `PEM lib`."""
    if b"-----BEGIN CERTIFICATE-----" not in cert.data:
        raise _error(path, "tls_server_config", f"{cert.name}: no PEM certificate in it")
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        probe.load_verify_locations(cadata=cert.data.decode("ascii", "replace"))
    except ssl.SSLError:
        raise _error(path, "tls_server_config", f"{cert.name}: the PEM certificate cannot be read") from None
    asked: list[bool] = []

    def no_password() -> bytes:  # never OpenSSL's prompt on a terminal
        asked.append(True)
        return b""

    with _memory_file(cert.data) as cert_path, _memory_file(key.data) as key_path:
        try:
            context.load_cert_chain(cert_path, key_path, password=no_password)
        except ssl.SSLError as exc:
            if asked:
                why = "the key is encrypted and the web config has no key password: decrypt it (openssl pkey -in KEY -out KEY.plain)"
            elif "KEY_VALUES_MISMATCH" in str(exc) or "key values mismatch" in str(exc):
                why = f"the key does not match the certificate {cert.name}"
            else:
                why = "no PEM private key in it"
            raise _error(path, "tls_server_config", f"{key.name}: {why}") from None


def _load_client_ca(path: Path, key: str, context: ssl.SSLContext, ca: _Material) -> None:
    if b"-----BEGIN CERTIFICATE-----" not in ca.data:
        raise _error(path, key, f"{ca.name}: no PEM certificate in it")
    try:
        context.load_verify_locations(cadata=ca.data.decode("ascii", "replace"))
    except ssl.SSLError:
        raise _error(path, key, f"{ca.name}: the PEM certificate cannot be read") from None


class _memory_file:
    """A path to `data` that lives in memory (/proc/self/fd of a memfd), for OpenSSL's loaders."""

    def __init__(self, data: bytes) -> None:
        self.fd = os.memfd_create("mirrorlag-web-config", os.MFD_CLOEXEC)
        os.write(self.fd, data)

    def __enter__(self) -> str:
        return f"/proc/self/fd/{self.fd}"

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


def _basic_auth(path: Path, users: Any) -> BasicAuth | None:
    if not users:
        return None
    hashes: dict[str, bytes] = {}
    for user, hashed in users.items():
        # The user is named, never the hash: it is as good as a password to an offline guesser.
        if not isinstance(hashed, str) or not _BCRYPT.fullmatch(hashed.encode()):
            raise _error(path, f"basic_auth_users.{user}", "not a bcrypt hash (htpasswd -nBC 10 \"\" | tr -d ':\\n' makes one)")
        if not 4 <= int(hashed[4:6]) <= 31:
            raise _error(path, f"basic_auth_users.{user}", "bcrypt cost must be 4 to 31")
        hashes[str(user)] = hashed.encode()
    return BasicAuth(hashes)


def _headers(path: Path, headers: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(headers, dict):
        raise _error(path, "http_server_config.headers", "must be a mapping of header to value")
    out = []
    for name, value in headers.items():
        where = f"http_server_config.headers.{name}"
        if name not in _HEADERS:
            raise _error(path, where, f"this header cannot be set (these can: {', '.join(_HEADERS)})")
        if not isinstance(value, str):
            raise _error(path, where, "must be a string")
        allowed = _HEADERS[name]
        if allowed is not None and value not in allowed:
            raise _error(path, where, f"must be one of {', '.join(allowed)}")
        if value:  # blank: unset, as in exporter-toolkit
            out.append((name, value))
    return tuple(out)


def _normal_ip(value: str) -> str:
    """An IP address in one spelling (Go's, compressed lower case) so SANs compare; others as given."""
    try:
        return str(ipaddress.ip_address(value.strip()))
    except ValueError:
        return value


def _san_value(kind: str, value: str) -> str:
    return _normal_ip(value) if kind == "IP Address" else value

