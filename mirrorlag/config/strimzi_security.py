"""A KafkaMirrorMaker2 cluster's `tls` and `authentication` as the Java client keys Strimzi's
operator gives MM2 (KafkaMirrorMaker2Connectors.addClusterToMirrorMaker2ConnectorConfig), its
Secrets read from mounted files: truststore and client certificate as inline PEM, SCRAM and PLAIN
as a JAAS config."""

from __future__ import annotations

from mirrorlag.config.strimzi_fields import ResourceReader
from mirrorlag.config.yaml_lines import LineMap

_MECHANISMS = {"scram-sha-512": "SCRAM-SHA-512", "scram-sha-256": "SCRAM-SHA-256", "plain": "PLAIN"}
_LOGIN_MODULES = {"PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
                  "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
                  "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule"}


def trusted_certificates(reader: ResourceReader, tls: LineMap, alias: str, where: str) -> None:
    pems: list[str] = []
    for cert, line, cert_where in reader.items(tls, "trustedCertificates", f"{where}.trustedCertificates"):
        secret = reader.string(cert, "secretName", f"{cert_where}.secretName")
        assert secret is not None
        if "certificate" in cert:
            pems.append(reader.secret_file(secret, str(cert["certificate"]), line, cert_where))
        elif "pattern" in cert:
            pems.extend(reader.secret_pattern(secret, str(cert["pattern"]), line, cert_where))
        else:
            raise reader.fail(line, cert_where, "certificate or pattern is required")
    if pems:
        line = tls.lines["trustedCertificates"]
        reader.put(f"{alias}.ssl.truststore.certificates", "\n".join(pems), line, f"{where}.trustedCertificates")
        reader.put(f"{alias}.ssl.truststore.type", "PEM", line, f"{where}.trustedCertificates")


def authentication(reader: ResourceReader, auth: LineMap, alias: str, where: str, protocol: str) -> str:
    """Puts the cluster's client authentication; returns its security.protocol."""
    kind = reader.string(auth, "type", f"{where}.type")
    line = auth.lines["type"]
    if kind == "tls":
        if protocol != "SSL":
            raise reader.fail(line, f"{where}.type", "tls authentication needs a tls section (TLS client "
                                                     "authentication is only over TLS)")
        pair = reader.mapping(auth, "certificateAndKey", f"{where}.certificateAndKey")
        assert pair is not None
        pair_where = f"{where}.certificateAndKey"
        secret = str(reader.string(pair, "secretName", f"{pair_where}.secretName"))
        cert = reader.secret_file(secret, str(reader.string(pair, "certificate", f"{pair_where}.certificate")),
                                  pair.at, pair_where)
        key = reader.secret_file(secret, str(reader.string(pair, "key", f"{pair_where}.key")), pair.at, pair_where)
        reader.put(f"{alias}.ssl.keystore.certificate.chain", cert, pair.at, pair_where)
        reader.put(f"{alias}.ssl.keystore.key", key, pair.at, pair_where)
        reader.put(f"{alias}.ssl.keystore.type", "PEM", pair.at, pair_where)
        return protocol
    if kind in _MECHANISMS:
        mechanism = _MECHANISMS[kind]
        username = reader.string(auth, "username", f"{where}.username")
        secret_ref = reader.mapping(auth, "passwordSecret", f"{where}.passwordSecret")
        assert secret_ref is not None
        ref_where = f"{where}.passwordSecret"
        password = reader.secret_file(str(reader.string(secret_ref, "secretName", f"{ref_where}.secretName")),
                                      str(reader.string(secret_ref, "password", f"{ref_where}.password")),
                                      secret_ref.at, ref_where)
        reader.put(f"{alias}.sasl.mechanism", mechanism, line, f"{where}.type")
        reader.put(f"{alias}.sasl.jaas.config",
                   f'{_LOGIN_MODULES[mechanism]} required username="{_jaas_quote(str(username))}" '
                   f'password="{_jaas_quote(password)}";', secret_ref.at, ref_where)
        return "SASL_SSL" if protocol == "SSL" else "SASL_PLAINTEXT"
    raise reader.fail(line, f"{where}.type", f"authentication type {kind} is not supported: mirrorlag's clients "
                                             f"authenticate with tls, scram-sha-512, scram-sha-256 or plain")


def _jaas_quote(text: str) -> str:
    # JaasConfig reads quoted values with Java string escapes (client.parse_jaas undoes this).
    return text.replace("\\", "\\\\").replace('"', '\\"')
