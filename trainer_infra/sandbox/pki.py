"""Certificates for the sandbox: one throwaway CA signs every serving and client cert.

A single CA keeps the wiring simple: the API server trusts it for client certs,
and every webhook configuration carries it as ``caBundle``.
"""

from __future__ import annotations

import datetime
import ipaddress
import warnings
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=7)


def _name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    """Subject: Kubernetes reads CN as the user name and each O as a group.

    X.509 caps CN at 64 characters and `cryptography` enforces it; Kubernetes does not, and ServiceAccount
    usernames (`system:serviceaccount:kubeflow-system:trainer-kubeflow-trainer-controller-manager`) are longer.
    """
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    with warnings.catch_warnings():  # it still warns without validating: noise in `trainer-infra simulate`
        warnings.simplefilter("ignore", UserWarning)
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name, _validate=len(common_name) <= 64))
    return x509.Name(attrs)


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


@dataclass(frozen=True)
class CertPair:
    """Paths of a PEM certificate and its key."""

    cert: Path
    key: Path


class CertificateAuthority:
    """An in-memory CA that writes leaf certificates to disk."""

    def __init__(self, directory: Path, common_name: str = "trainer-platform-e2e-ca") -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        name = _name(common_name)
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
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
            .sign(self._key, hashes.SHA256())
        )
        self.cert_pem = self._cert.public_bytes(serialization.Encoding.PEM)
        self.cert_path = directory / "ca.crt"
        self.cert_path.write_bytes(self.cert_pem)

    def issue(
        self,
        name: str,
        common_name: str,
        *,
        organizations: tuple[str, ...] = (),
        hosts: tuple[str, ...] = (),
        client: bool = False,
        directory: Path | None = None,
        cert_file: str | None = None,
        key_file: str | None = None,
    ) -> CertPair:
        """Issue a serving (``hosts``) and/or client certificate and write it as PEM."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        usages = [ExtendedKeyUsageOID.CLIENT_AUTH] if client else []
        if hosts:
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name, organizations))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        )
        if hosts:
            sans: list[x509.GeneralName] = []
            for host in hosts:
                try:
                    sans.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    sans.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        target = directory or self.directory
        target.mkdir(parents=True, exist_ok=True)
        pair = CertPair(target / (cert_file or f"{name}.crt"), target / (key_file or f"{name}.key"))
        pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        pair.key.write_bytes(_key_pem(key))
        pair.key.chmod(0o600)
        return pair


def service_account_keypair(directory: Path) -> CertPair:
    """RSA key pair for signing service-account tokens (``cert`` holds the public key)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pair = CertPair(directory / "sa.pub", directory / "sa.key")
    pair.key.write_bytes(_key_pem(key))
    pair.key.chmod(0o600)
    pair.cert.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return pair
