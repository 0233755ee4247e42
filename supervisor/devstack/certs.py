"""A self-signed CA and a certificate it signs for this machine's loopback names: what the dev
stack serves TLS with (the service, the tasks' chat API, the SASL_SSL broker). PEM files; the
key is unencrypted PKCS#8 and readable by its owner only."""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

VALID_DAYS = 365


@dataclass(frozen=True)
class Certs:
    ca: Path  # the CA certificate clients trust
    cert: Path  # the server's certificate (then the CA's: a chain)
    key: Path  # the server's private key
    keystore: Path  # key then chain in one file (a Kafka PEM keystore)


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _write(path: Path, data: bytes, private: bool = False) -> None:
    path.write_bytes(data)
    if private:
        os.chmod(path, 0o600)


def self_signed(
    directory: Path, names: tuple[str, ...] = (), addresses: tuple[str, ...] = ()
) -> Certs:
    """The CA and server files under `directory`, made once (kept if they are there); the
    certificate names loopback, this machine's name, `names` and the IP `addresses`."""
    directory.mkdir(parents=True, exist_ok=True)
    certs = Certs(
        directory / "ca.pem",
        directory / "server.pem",
        directory / "server.key",
        directory / "keystore.pem",
    )
    if all(p.exists() for p in (certs.ca, certs.cert, certs.key, certs.keystore)):
        return certs
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    until = now + dt.timedelta(days=VALID_DAYS)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("Sluicegate dev CA"))
        .issuer_name(_name("Sluicegate dev CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    hosts = {"localhost", socket.gethostname(), *names}
    sans: list[x509.GeneralName] = [x509.DNSName(h) for h in sorted(hosts)]
    ips = dict.fromkeys(("127.0.0.1", "::1", *addresses))
    sans += [x509.IPAddress(ipaddress.ip_address(a)) for a in ips]
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("localhost"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [x509.oid.ExtendedKeyUsageOID.SERVER_AUTH, x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    chain = cert.public_bytes(pem) + ca.public_bytes(pem)
    _write(certs.ca, ca.public_bytes(pem))
    _write(certs.cert, chain)
    _write(certs.key, key_pem, private=True)
    _write(certs.keystore, key_pem + chain, private=True)
    return certs
