"""The pod records of cluster DNS, answered from the API server, until the real node runs CoreDNS.

``torchrun`` reaches its rendezvous at ``PET_MASTER_ADDR`` = ``<trainjob>-node-0-0.<trainjob>``, the first pod's
name under the JobSet's headless Service, even with one node: the TCPStore's server connects to itself by that
name (found on the real node: ``[c10d] The IPv6 network addresses of (…-node-0-0.…, 29400) cannot be retrieved
(gai error: -3 …)`` without it). CoreDNS's ``kubernetes`` plugin answers such a name with the pod's IP when the
pod sets ``hostname`` and ``subdomain`` (JobSet does). This server answers exactly those A queries
(``<hostname>.<subdomain>.<namespace>.svc.<cluster domain>``) and nothing else (NXDOMAIN; no AAAA records, no
Service or external names). It stands in for that one part of CoreDNS; the kubelet points pods at it with
``clusterDNS`` as it would at CoreDNS's Service address.
"""

from __future__ import annotations

import socket
import struct
import threading

from tests.e2e.kube import ApiError, KubeClient

A, IN = 1, 1
NOERROR, NXDOMAIN = 0, 3


def question(query: bytes) -> tuple[str, int, int]:
    """(name, qtype, end offset of the question) of a one-question DNS query."""
    labels, pos = [], 12
    while query[pos]:
        length = query[pos]
        labels.append(query[pos + 1 : pos + 1 + length].decode("ascii", "replace"))
        pos += 1 + length
    qtype = struct.unpack("!H", query[pos + 1 : pos + 3])[0]
    return ".".join(labels).lower(), qtype, pos + 5


def response(query: bytes, rcode: int, addresses: list[str]) -> bytes:
    """The reply to ``query``: its question, then one A record (TTL 5 s) per address."""
    _, _, end = question(query)
    flags = 0x8180 | rcode  # response, recursion desired and available
    header = struct.pack("!HHHHHH", struct.unpack("!H", query[:2])[0], flags, 1, len(addresses), 0, 0)
    answers = b"".join(struct.pack("!HHHIH", 0xC00C, A, IN, 5, 4) + socket.inet_aton(a) for a in addresses)
    return header + query[12:end] + answers


class PodDns:
    """A UDP DNS server on ``address``:53 (a thread of this process) answering pods' names."""

    def __init__(self, client: KubeClient, address: str, domain: str = "cluster.local") -> None:
        self.client = client
        self.address = address
        self.suffix = f".svc.{domain}"
        self.queries: list[tuple[str, int, list[str]]] = []
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._thread = threading.Thread(target=self._serve, name="pod-dns", daemon=True)
        self._stopped = threading.Event()

    def lookup(self, name: str) -> list[str] | None:
        """The pod's IP for ``<hostname>.<subdomain>.<namespace>.svc.<domain>``; None: no such name."""
        if not name.endswith(self.suffix):
            return None
        parts = name.removesuffix(self.suffix).split(".")
        if len(parts) != 3:
            return None
        hostname, subdomain, namespace = parts
        try:
            pods = self.client.list("v1", "Pod", namespace)
        except ApiError:
            return None
        ips = [
            p["status"]["podIP"]
            for p in pods
            if p["spec"].get("hostname") == hostname
            and p["spec"].get("subdomain") == subdomain
            and p.get("status", {}).get("podIP")
        ]
        return ips or None

    def answer(self, query: bytes) -> bytes:
        name, qtype, _ = question(query)
        ips = self.lookup(name)
        self.queries.append((name, qtype, ips or []))
        if ips is None:
            return response(query, NXDOMAIN, [])
        return response(query, NOERROR, ips if qtype == A else [])

    def _serve(self) -> None:
        while not self._stopped.is_set():
            try:
                query, peer = self._socket.recvfrom(512)
            except TimeoutError:  # look at the stop flag twice a second
                continue
            except OSError:
                return
            try:
                self._socket.sendto(self.answer(query), peer)
            except (IndexError, struct.error, OSError):
                continue  # a malformed query gets no answer

    def start(self) -> PodDns:
        self._socket.bind((self.address, 53))
        self._socket.settimeout(0.5)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self._socket.close()
