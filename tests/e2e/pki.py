"""The harness's throwaway CA: trainer_infra/sandbox/pki.py."""

from trainer_infra.sandbox.pki import CertificateAuthority, CertPair, service_account_keypair

__all__ = ["CertPair", "CertificateAuthority", "service_account_keypair"]
