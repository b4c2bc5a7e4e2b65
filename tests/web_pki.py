"""A throwaway PKI for the listener's TLS tests, made with `cryptography` in milliseconds (EC keys):
a CA, a server certificate for 127.0.0.1 and localhost, a client certificate the CA signed, one
more for a name client_allowed_sans leaves out, and a self-signed client certificate."""

from __future__ import annotations

import datetime
import ipaddress
import secrets
import ssl
from dataclasses import dataclass
from pathlib import Path

import bcrypt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

USER, PASSWORD = "prometheus", "scrape-Pw-7f3a"


@dataclass(frozen=True)
class WebPki:
    directory: Path
    ca: Path
    server: tuple[Path, Path]  # cert, key
    client: tuple[Path, Path]  # signed by `ca`, SAN DNS:prometheus
    other_client: tuple[Path, Path]  # signed by `ca`, SAN DNS:intruder
    self_signed: tuple[Path, Path]  # signed by itself, SAN DNS:prometheus

    def client_context(self, cert: tuple[Path, Path] | None = None) -> ssl.SSLContext:
        """A client that trusts the CA (and checks the host name), presenting `cert` if given."""
        context = ssl.create_default_context(cafile=str(self.ca))
        if cert is not None:
            context.load_cert_chain(*map(str, cert))
        return context


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write(directory: Path, name: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> tuple[Path, Path]:
    cert_path, key_path = directory / f"{name}.pem", directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


def _certificate(subject: str, key: ec.EllipticCurvePrivateKey, issuer: tuple[str, ec.EllipticCurvePrivateKey] | None,
                 sans: list[x509.GeneralName], usage: x509.ObjectIdentifier | None) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    issuer_name, issuer_key = issuer if issuer is not None else (subject, key)
    builder = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(_name(issuer_name))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=2)))
    if usage is None:  # a CA
        builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True).add_extension(
            x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                          key_encipherment=False, data_encipherment=False, key_agreement=False,
                          encipher_only=False, decipher_only=False), critical=True)
    else:
        builder = (builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
                   .add_extension(x509.SubjectAlternativeName(sans), critical=False))
    return builder.sign(issuer_key, hashes.SHA256())


def make_web_pki(directory: Path) -> WebPki:
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = f"mirrorlag-test-ca-{secrets.token_hex(4)}"  # two PKIs' CAs must not share a name
    ca, _ = _write(directory, "ca", _certificate(ca_name, ca_key, None, [], None), ca_key)
    ca_issuer = (ca_name, ca_key)

    def leaf(name: str, sans: list[x509.GeneralName], usage: x509.ObjectIdentifier,
             self_signed: bool = False) -> tuple[Path, Path]:
        key = ec.generate_private_key(ec.SECP256R1())
        return _write(directory, name, _certificate(name, key, None if self_signed else ca_issuer, sans, usage), key)

    server = leaf("server", [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")],
                  ExtendedKeyUsageOID.SERVER_AUTH)
    client = leaf("client", [x509.DNSName("prometheus")], ExtendedKeyUsageOID.CLIENT_AUTH)
    other = leaf("other-client", [x509.DNSName("intruder")], ExtendedKeyUsageOID.CLIENT_AUTH)
    self_signed = leaf("self-signed", [x509.DNSName("prometheus")], ExtendedKeyUsageOID.CLIENT_AUTH, self_signed=True)
    return WebPki(directory, ca, server, client, other, self_signed)


def password_hash(password: str = PASSWORD, cost: int = 4) -> str:
    """A bcrypt hash as htpasswd writes it ($2y$); cost 4 keeps the tests fast."""
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(cost)).decode().replace("$2b$", "$2y$", 1)
