"""A small Kubernetes REST client for the harness.

The official Python client cannot ask for ``fieldValidation=Strict`` on
server-side apply, and the harness needs exactly that (unknown fields must be
errors, not silently pruned), so the few verbs we use are spoken directly.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3

Obj = dict[str, Any]


class ApiError(RuntimeError):
    """A non-2xx answer from the API server, with its status and message."""

    def __init__(self, status: int, message: str, body: Obj | None = None) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message
        self.body = body or {}


@dataclass(frozen=True)
class ResourceInfo:
    """Where a kind lives in the REST API."""

    plural: str
    namespaced: bool


def split_api_version(api_version: str) -> tuple[str, str]:
    """``apps/v1`` → (``apps``, ``v1``); ``v1`` → (``""``, ``v1``)."""
    if "/" in api_version:
        group, version = api_version.split("/", 1)
        return group, version
    return "", api_version


class KubeClient:
    """Client-certificate (optionally impersonating) access to one API server; ``bearer``: a token's
    (a ServiceAccount's, as a pod holds it) instead."""

    def __init__(
        self,
        server: str,
        ca: Path,
        cert: Path | None,
        key: Path | None,
        *,
        impersonate_user: str | None = None,
        impersonate_groups: tuple[str, ...] = (),
        bearer: str | None = None,
    ) -> None:
        self.server = server.rstrip("/")
        self._http = urllib3.PoolManager(
            cert_reqs="CERT_REQUIRED",
            ca_certs=str(ca),
            cert_file=str(cert) if cert else None,
            key_file=str(key) if key else None,
        )
        self._headers: dict[str, str] = {"Authorization": f"Bearer {bearer}"} if bearer else {}
        self._impersonate = (impersonate_user, impersonate_groups)
        self._discovery: dict[tuple[str, str], dict[str, ResourceInfo]] = {}

    def impersonating(self, user: str, groups: tuple[str, ...] = ()) -> KubeClient:
        """Same credentials, acting as another user (needs impersonate rights: admin has them)."""
        pool = self._http.connection_pool_kw
        return KubeClient(
            self.server,
            Path(pool["ca_certs"]),
            Path(pool["cert_file"]),
            Path(pool["key_file"]),
            impersonate_user=user,
            impersonate_groups=groups,
        )

    # -- raw ----------------------------------------------------------------
    def request(
        self,
        method: str,
        path: str,
        body: Obj | None = None,
        *,
        params: dict[str, str] | None = None,
        content_type: str = "application/json",
        timeout: float = 30.0,
    ) -> Obj:
        """One REST call; raise ApiError unless 2xx."""
        url = self.server + path
        if params:
            url += "?" + urllib.parse.urlencode(params)
        headers = {"Accept": "application/json", **self._headers}
        user, groups = self._impersonate
        if user:
            headers["Impersonate-User"] = user
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        # urllib3 needs repeated headers for several groups: pass them joined is wrong, so
        # we send one group per request header via HTTPHeaderDict.
        header_dict = urllib3.HTTPHeaderDict(headers)
        for group in groups if user else ():
            header_dict.add("Impersonate-Group", group)
        resp = self._http.request(
            method, url, body=data, headers=header_dict, timeout=urllib3.Timeout(total=timeout), retries=False
        )
        text = resp.data.decode(errors="replace")
        try:
            payload: Obj = json.loads(text) if text else {}
        except json.JSONDecodeError:
            payload = {"message": text}
        if resp.status >= 300:
            raise ApiError(resp.status, str(payload.get("message", text))[:4000], payload)
        return payload

    # -- discovery ----------------------------------------------------------
    def resource(self, api_version: str, kind: str) -> ResourceInfo:
        """Plural and scope of a kind (discovery is cached; refreshed on a miss)."""
        group, version = split_api_version(api_version)
        key = (group, version)
        if kind not in self._discovery.get(key, {}):
            path = f"/api/{version}" if not group else f"/apis/{group}/{version}"
            listing = self.request("GET", path)
            self._discovery[key] = {
                r["kind"]: ResourceInfo(r["name"], bool(r["namespaced"]))
                for r in listing.get("resources", [])
                if "/" not in r["name"]
            }
        try:
            return self._discovery[key][kind]
        except KeyError:
            raise ApiError(404, f"kind {kind} not served in {api_version}") from None

    def path(self, api_version: str, kind: str, namespace: str | None = None, name: str | None = None) -> str:
        """REST path of a collection or object."""
        group, version = split_api_version(api_version)
        info = self.resource(api_version, kind)
        base = f"/api/{version}" if not group else f"/apis/{group}/{version}"
        if info.namespaced:
            if not namespace:
                raise ValueError(f"{kind} is namespaced: a namespace is required")
            base += f"/namespaces/{namespace}"
        base += f"/{info.plural}"
        return f"{base}/{name}" if name else base

    # -- verbs --------------------------------------------------------------
    def apply(
        self,
        obj: Obj,
        *,
        field_manager: str = "trainer-platform-e2e",
        strict: bool = True,
        force: bool = True,
        dry_run: bool = False,
    ) -> Obj:
        """Server-side apply; strict field validation makes unknown fields an error."""
        meta = obj["metadata"]
        params = {"fieldManager": field_manager, "force": str(force).lower()}
        if strict:
            params["fieldValidation"] = "Strict"
        if dry_run:
            params["dryRun"] = "All"
        path = self.path(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])
        return self.request("PATCH", path, obj, params=params, content_type="application/apply-patch+yaml")

    def create(self, obj: Obj, *, dry_run: bool = False, strict: bool = True) -> Obj:
        """POST an object (``dry_run`` runs admission, webhooks included, without storing)."""
        params = {"fieldValidation": "Strict"} if strict else {}
        if dry_run:
            params["dryRun"] = "All"
        path = self.path(obj["apiVersion"], obj["kind"], obj["metadata"].get("namespace"))
        return self.request("POST", path, obj, params=params)

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj:
        """GET one object."""
        return self.request("GET", self.path(api_version, kind, namespace, name))

    def exists(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> bool:
        """Whether the object exists (a 404 is False; any other error is raised)."""
        try:
            self.get(api_version, kind, name, namespace)
        except ApiError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[Obj]:
        """Items of a collection, optionally filtered."""
        params = {}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        answer = self.request("GET", self.path(api_version, kind, namespace), params=params)
        items: list[Obj] = answer.get("items", [])
        return items

    def log(
        self, name: str, namespace: str, container: str | None = None, *, previous: bool = False, tail: int = 0
    ) -> str:
        """A pod's container log, as ``kubectl logs`` shows it (the API server reads it from the kubelet);
        ``previous``: the run before the last restart; ``tail``: only the last lines."""
        url = self.server + self.path("v1", "Pod", namespace, name) + "/log"
        query = {"container": container} if container else {}
        if previous:
            query["previous"] = "true"
        if tail:
            query["tailLines"] = str(tail)
        if query:
            url += "?" + urllib.parse.urlencode(query)
        resp = self._http.request("GET", url, headers=self._headers, timeout=urllib3.Timeout(total=30), retries=False)
        text = resp.data.decode(errors="replace")
        if resp.status >= 300:
            raise ApiError(resp.status, text[:4000])
        return text

    def collection(self, api_version: str, kind: str) -> str:
        """REST path of a kind across every namespace."""
        group, version = split_api_version(api_version)
        base = f"/api/{version}" if not group else f"/apis/{group}/{version}"
        return f"{base}/{self.resource(api_version, kind).plural}"

    def list_all(self, api_version: str, kind: str) -> Obj:
        """The list object (items and its resourceVersion) of a kind across every namespace."""
        return self.request("GET", self.collection(api_version, kind), timeout=120)

    def watch(
        self, api_version: str, kind: str, *, resource_version: str, stop: threading.Event, timeout: int = 300
    ) -> Iterator[tuple[str, Obj]]:
        """(event type, object) of a kind across every namespace from ``resource_version``, until ``stop`` is set
        or the server ends the watch (then list again: the caller's loop)."""
        params = {"watch": "true", "resourceVersion": resource_version, "timeoutSeconds": str(timeout)}
        url = self.server + self.collection(api_version, kind) + "?" + urllib.parse.urlencode(params)
        resp = self._http.request(
            "GET", url, preload_content=False, timeout=urllib3.Timeout(connect=10, read=timeout + 30), retries=False
        )
        try:
            if resp.status >= 300:
                raise ApiError(resp.status, resp.data.decode(errors="replace")[:2000])
            buffer = b""
            for chunk in resp.stream(65536, decode_content=True):
                if stop.is_set():
                    return
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    if event.get("type") == "ERROR":
                        raise ApiError(int(event["object"].get("code", 500)), str(event["object"].get("message")))
                    yield str(event["type"]), event["object"]
        finally:
            resp.release_conn()

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> None:
        """DELETE one object, ignoring NotFound, with foreground propagation."""
        try:
            self.request("DELETE", self.path(api_version, kind, namespace, name), {"propagationPolicy": "Background"})
        except ApiError as exc:
            if exc.status != 404:
                raise


class FatalWaitError(Exception):
    """Raised by a ``wait_for`` check to stop waiting at once (e.g. the process died)."""


def wait_for(what: str, check: Callable[[], Any], timeout: float, interval: float = 0.5) -> Any:
    """Poll ``check`` until it returns a truthy value; TimeoutError names ``what`` otherwise.

    The last exception or falsy value seen is included so a failure explains itself;
    a FatalWaitError from ``check`` ends the wait immediately.
    """
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            result = check()
            if result:
                return result
            last = result
        except FatalWaitError:
            raise
        except Exception as exc:
            last = exc
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
        time.sleep(interval)
