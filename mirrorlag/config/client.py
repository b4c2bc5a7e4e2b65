"""Java Kafka client keys of an MM2 file -> librdkafka configuration for one cluster (docs/design.md §5).

MM2 (MirrorMakerConfig.clusterProps) gives cluster A the top-level client keys, overridden by
`A.`-prefixed keys; mirrorlag only runs admin-type requests, so `A.admin.` keys override those.
Only the keys below are read; anything librdkafka cannot do (JKS/PKCS12 stores, GSSAPI,
OAUTHBEARER) is a ConfigError that says what to do instead. Messages never echo secret values.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping, NamedTuple

from mirrorlag.config.settings import is_secret_key
from mirrorlag.errors import ConfigError


class Prop(NamedTuple):
    """A property value in force and where it was set, so errors can point at it."""

    value: str
    file: Path
    line: int
    key: str  # the key as written, e.g. "A.security.protocol" or "A->B.topics"


def error_at(prop: Prop, message: str) -> ConfigError:
    return ConfigError(message, prop.file, prop.line, prop.key)


# The Java client keys mirrorlag translates; an MM2 file has many more that are not ours.
CLIENT_KEYS = (
    "bootstrap.servers",
    "client.id",
    "request.timeout.ms",
    "security.protocol",
    "sasl.mechanism",
    "sasl.jaas.config",
    "ssl.truststore.location",
    "ssl.truststore.type",
    "ssl.truststore.certificates",
    "ssl.keystore.location",
    "ssl.keystore.type",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
)

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
LOGIN_MODULES = (
    "org.apache.kafka.common.security.plain.PlainLoginModule",
    "org.apache.kafka.common.security.scram.ScramLoginModule",
)


def cluster_client_config(alias: str, props: Mapping[str, Prop]) -> dict[str, str]:
    """librdkafka configuration for cluster `alias` from the merged properties."""
    return librdkafka_config(java_client_props(alias, props))


def java_client_props(alias: str, props: Mapping[str, Prop]) -> dict[str, Prop]:
    """The Java client keys in force for `alias`: top level < `alias.` < `alias.admin.`."""
    java: dict[str, Prop] = {}
    for prefix in ("", f"{alias}.", f"{alias}.admin."):
        java.update({k: props[prefix + k] for k in CLIENT_KEYS if prefix + k in props})
    return java


def librdkafka_config(java: Mapping[str, Prop]) -> dict[str, str]:
    out: dict[str, str] = {}
    if prop := java.get("bootstrap.servers"):
        servers = [s.strip() for s in prop.value.split(",") if s.strip()]
        if not servers:
            raise error_at(prop, "expected a comma-separated list of host:port, got an empty value")
        out["bootstrap.servers"] = ",".join(servers)
    if prop := java.get("client.id"):
        out["client.id"] = prop.value.strip()
    if prop := java.get("request.timeout.ms"):
        text = prop.value.strip()
        if not re.fullmatch(r"\+?[0-9]+", text) or int(text) <= 0:
            raise error_at(prop, f"expected an integer number of milliseconds > 0, got {prop.value!r}")
        if int(text) > 900_000:  # librdkafka's range; beyond it the client refuses to start
            raise error_at(prop, f"expected an integer number of milliseconds from 1 to 900000, got {prop.value!r}")
        out["request.timeout.ms"] = str(int(text))

    protocol = "PLAINTEXT"  # Java's default
    if prop := java.get("security.protocol"):
        protocol = prop.value.strip().upper()
        if protocol not in PROTOCOLS:
            raise error_at(prop, f"expected one of {', '.join(PROTOCOLS)}, got {prop.value!r}")
        out["security.protocol"] = protocol
    # Like the Java client, SASL keys only matter for SASL_* and SSL keys only for *SSL: a
    # top-level truststore shared by all clusters must not break a PLAINTEXT cluster.
    if protocol.startswith("SASL_"):
        out.update(_sasl(java))
    if protocol.endswith("SSL"):
        out.update(_ssl(java))
    return out


def _sasl(java: Mapping[str, Prop]) -> dict[str, str]:
    mech_prop = java.get("sasl.mechanism")
    where = mech_prop or java["security.protocol"]  # the protocol key is set: it says SASL_*
    mechanism = mech_prop.value.strip().upper() if mech_prop else "GSSAPI"  # Java's default
    if mechanism in ("GSSAPI", "OAUTHBEARER"):
        hint = "" if mech_prop else " (sasl.mechanism is unset and defaults to GSSAPI)"
        raise error_at(
            where,
            f"SASL mechanism {mechanism} is not supported yet{hint}; "
            f"mirrorlag supports {', '.join(MECHANISMS)}",
        )
    if mechanism not in MECHANISMS:
        raise error_at(where, f"expected one of {', '.join(MECHANISMS)}, got {where.value!r}")
    jaas = java.get("sasl.jaas.config")
    if jaas is None:
        raise error_at(where, f"SASL mechanism {mechanism} needs sasl.jaas.config with username and password")
    username, password = parse_jaas(jaas)
    return {"sasl.mechanisms": mechanism, "sasl.username": username, "sasl.password": password}


# One JAAS login-module entry: `<class> <flag> name=value ... ;` (values quoted or bare words).
_JAAS_HEAD = re.compile(r"\s*([A-Za-z_$][\w.$]*)\s+(required|requisite|sufficient|optional)\b", re.I)
_JAAS_OPTION = re.compile(r'\s*([\w.$-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"=]+))', re.S)
_JAAS_END = re.compile(r"\s*;\s*")
_JAAS_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


def parse_jaas(prop: Prop) -> tuple[str, str]:
    """(username, password) of a PlainLoginModule/ScramLoginModule `sasl.jaas.config`."""
    expected = 'invalid value (expected `<LoginModule> required username="..." password="...";`)'
    head = _JAAS_HEAD.match(prop.value)
    if head is None:
        raise error_at(prop, expected)
    if head[1] not in LOGIN_MODULES:
        # A dotted class name is no secret, and naming it tells the user what to change.
        module = f" {head[1]}" if "." in head[1] else ""
        supported = "mirrorlag supports PlainLoginModule and ScramLoginModule"
        raise error_at(prop, f"login module{module} is not supported ({supported})")
    options: dict[str, str] = {}
    pos = head.end()
    while (option := _JAAS_OPTION.match(prop.value, pos)) is not None:
        options[option[1]] = option[3] if option[2] is None else _jaas_unescape(option[2])
        pos = option.end()
    if not _JAAS_END.fullmatch(prop.value, pos):  # Kafka requires exactly one entry, ended by ';'
        raise error_at(prop, expected)
    if "username" not in options or "password" not in options:
        raise error_at(prop, "invalid value: the login module needs both username and password")
    return options["username"], options["password"]


def _jaas_unescape(quoted: str) -> str:
    # JaasConfig reads quoted values with StreamTokenizer: backslash escapes as in Java strings.
    return re.sub(r"\\(.)", lambda m: _JAAS_ESCAPES.get(m[1], m[1]), quoted, flags=re.S)


def _ssl(java: Mapping[str, Prop]) -> dict[str, str]:
    out: dict[str, str] = {}
    if prop := _store(java, "truststore", inline=("ssl.truststore.certificates",)):
        out["ssl.ca.location"] = prop.value.strip()
    if prop := java.get("ssl.truststore.certificates"):
        out["ssl.ca.pem"] = _pem(prop)
    if prop := _store(java, "keystore", inline=("ssl.keystore.certificate.chain", "ssl.keystore.key")):
        # A Java PEM keystore file holds the certificate chain and the key; librdkafka takes
        # them as two settings, and OpenSSL finds each in the same file.
        out["ssl.certificate.location"] = out["ssl.key.location"] = prop.value.strip()
    if prop := java.get("ssl.keystore.certificate.chain"):
        out["ssl.certificate.pem"] = _pem(prop)
    if prop := java.get("ssl.keystore.key"):
        out["ssl.key.pem"] = _pem(prop)
    if prop := java.get("ssl.key.password"):
        out["ssl.key.password"] = prop.value
    if prop := java.get("ssl.endpoint.identification.algorithm"):
        algorithm = prop.value.strip().lower()
        if algorithm not in ("", "https"):
            raise error_at(prop, f"expected https or an empty value, got {prop.value!r}")
        out["ssl.endpoint.identification.algorithm"] = algorithm or "none"
    return out


def _store(java: Mapping[str, Prop], kind: str, inline: tuple[str, ...]) -> Prop | None:
    """The PEM `ssl.<kind>.location`, if set; any store librdkafka cannot read is an error."""
    location = java.get(f"ssl.{kind}.location")
    inline_props = [java[k] for k in inline if k in java]
    if location is None and not inline_props:
        return None
    type_prop = java.get(f"ssl.{kind}.type")
    store_type = type_prop.value.strip().upper() if type_prop else "JKS"  # Java's default
    if store_type == "PEM":
        return location
    if type_prop is not None and store_type not in ("JKS", "PKCS12") and is_secret_key(type_prop.key):
        store_type = "this"  # settings' secret pattern covers every ssl.keystore.* key
    if location is None:
        raise error_at(inline_props[0], f"inline PEM needs ssl.{kind}.type=PEM, not {store_type}")
    raise error_at(location, _conversion_advice(kind, store_type, location))


def _conversion_advice(kind: str, store_type: str, location: Prop) -> str:
    if store_type not in ("JKS", "PKCS12"):
        return f"{store_type} store type is not supported; librdkafka reads PEM (ssl.{kind}.type=PEM)"
    # Keystore paths match settings.is_secret_key, so the commands then use placeholder names.
    hidden = is_secret_key(location.key)
    path = f"{kind}.{'jks' if store_type == 'JKS' else 'p12'}" if hidden else location.value.strip()
    pem = f"{kind}.pem" if hidden else f"{path}.pem"
    if store_type == "JKS" and kind == "truststore":
        steps = [f"`keytool -exportcert -rfc -keystore {path} -alias <ca-alias> -file {pem}`"]
    elif store_type == "JKS":
        steps = [
            f"`keytool -importkeystore -srckeystore {path} -destkeystore {kind}.p12 -deststoretype PKCS12`",
            f"`openssl pkcs12 -in {kind}.p12 -nodes -out {pem}`",
        ]
    else:
        options = "-nokeys" if kind == "truststore" else "-nodes"
        steps = [f"`openssl pkcs12 -in {path} {options} -out {pem}`"]
    return (
        f"{store_type} stores cannot be read by librdkafka; convert with {' then '.join(steps)}, "
        f"then set ssl.{kind}.location={pem} and ssl.{kind}.type=PEM"
    )


_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)


def _pem(prop: Prop) -> str:
    """Inline PEM rewritten with OpenSSL's line breaks.

    Java's PEM parser ignores whitespace, so operators often write inline PEM on one line (a
    `\\` continuation drops the newline); OpenSSL, under librdkafka, needs 64-column lines.
    """
    blocks = _PEM_BLOCK.findall(prop.value)
    if not blocks:
        raise error_at(prop, "invalid value (expected PEM text: -----BEGIN ...----- ... -----END ...-----)")
    out = []
    for label, body in blocks:
        b64 = "".join(body.split())
        if not re.fullmatch(r"[A-Za-z0-9+/]*={0,2}", b64):
            raise error_at(prop, f"invalid value (the {label} block is not base64)")
        lines = [b64[i : i + 64] for i in range(0, len(b64), 64)]
        out.append("\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"]))
    return "\n".join(out) + "\n"
