"""Admission rules that keep the team's Hugging Face token (Secret `hf-token`, `tenancy/secrets.py`) where it
belongs: the platform's dataset and model initializers, which send it to the Hub the platform names
(`tenancy.hub.endpoint`, injected as HF_ENDPOINT) and run no member code. A member's TrainJob may neither move the
token elsewhere (trainer env, runtime patches) nor steer the initializers to another Hub; a member's own
TrainingRuntime never references it (its initializers may run any image).

The JobSet and Pod policies are the backstop: there the Secret may be read, as env, by an initializer container
only, never mounted (the JobSets Trainer makes from the platform's runtimes do exactly that)."""

from __future__ import annotations

from trainer_infra.admission.cel import initializer_envs, lit
from trainer_infra.admission.model import AdmissionRule, AdmissionSettings, AdmittedKind
from trainer_infra.core.upstream import huggingface
from trainer_infra.manifests.runtime import INITIALIZERS
from trainer_infra.tenancy.secrets import HF_TOKEN_SECRET

#: what huggingface_hub reads for where it sends the token, and the token itself: the platform's alone
HUB_ENV = (huggingface.ENDPOINT_ENV, huggingface.TOKEN_ENV, huggingface.LEGACY_TOKEN_ENV)
#: kinds whose pods may read the Secret in their initializer containers (what Trainer makes of the platform's runtimes)
_MADE_BY_CONTROLLERS = ("Pod", "JobSet")

_SECRET = lit(HF_TOKEN_SECRET)


def _env_reads(c: str) -> str:
    e = "e.valueFrom"
    return (
        f"(has({c}.env) && {c}.env.exists(e, has({e}) && has({e}.secretKeyRef) && "
        f"has({e}.secretKeyRef.name) && {e}.secretKeyRef.name == {_SECRET}))"
    )


def _env_from_reads(c: str) -> str:
    return (
        f"(has({c}.envFrom) && {c}.envFrom.exists(x, has(x.secretRef) && has(x.secretRef.name) && "
        f"x.secretRef.name == {_SECRET}))"
    )


def _mounts() -> str:
    secret = f"(has(v.secret) && has(v.secret.secretName) && v.secret.secretName == {_SECRET})"
    projected = (
        "(has(v.projected) && has(v.projected.sources) && v.projected.sources.exists(p, has(p.secret) && "
        f"has(p.secret.name) && p.secret.name == {_SECRET}))"
    )
    return f"(has(s.volumes) && s.volumes.exists(v, {secret} || {projected}))"


def _pod_token(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    reads = [_env_reads("c")]
    if kind.name != "TrainJob":  # a runtime patch's containers have no envFrom
        reads.append(_env_from_reads("c"))
    allowed = f"c.name in {lit(list(INITIALIZERS))} || " if kind.name in _MADE_BY_CONTROLLERS else ""
    containers = " && ".join(
        f"(!has(s.{f}) || s.{f}.all(c, {allowed}!({' || '.join(reads)})))" for f in kind.pod.containers
    )
    return f"!{_mounts()} && {containers}"


def _trainer_token(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    t = "object.spec.trainer"
    return f"!has({t}) || !{_env_reads(t)}"


_TOKEN_MESSAGE = (
    f"reads Secret {HF_TOKEN_SECRET}, the team's Hugging Face token, outside the platform's initializers: only the "
    "dataset and model initializers of the platform's runtimes read it, so that no code of a member's sees it. "
    "Download models and datasets with spec.initializer (storageUri hf://<repo>; the token is used there for "
    "you); the trainer step reads them from /workspace/model and /workspace/dataset"
)
TEAM_TOKEN = AdmissionRule(
    "teamToken", ("Pod", "JobSet", "TrainingRuntime", "TrainJob"), _TOKEN_MESSAGE, _pod_token, per_pod=True
)
TRAINER_TOKEN = AdmissionRule("trainerToken", ("TrainJob",), _TOKEN_MESSAGE, _trainer_token)


def _initializer_hub(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    return initializer_envs(lambda env: f"!{env}.exists(e, e.name in {lit(list(HUB_ENV))})")


INITIALIZER_HUB = AdmissionRule(
    "initializerHub",
    ("TrainJob",),
    f"spec.initializer.dataset.env / spec.initializer.model.env set {', '.join(HUB_ENV)}: the platform sets "
    f"them. The initializers read the team's Hugging Face token from the team's Secret {HF_TOKEN_SECRET} (set by "
    "the platform team: teams[].secrets.hfToken) and send it only to the Hub the platform names "
    "(tenancy.hub.endpoint). Drop the variable; ask your platform team for the token or another Hub "
    "(a personal token of your own may go in ACCESS_TOKEN)",
    _initializer_hub,
)


def _initializer_secrets(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    i = "object.spec.initializer"
    per = [f"(!has({i}.{s}) || (!has({i}.{s}.secretRef) && !{_env_reads(f'{i}.{s}')}))" for s in ("dataset", "model")]
    return f"!has({i}) || ({' && '.join(per)})"


INITIALIZER_SECRETS = AdmissionRule(
    "initializerSecrets",
    ("TrainJob",),
    "spec.initializer.dataset / spec.initializer.model set secretRef, or env reading Secret "
    f"{HF_TOKEN_SECRET}: the initializers hold the team's Hugging Face token and mount the team volume, so "
    "every variable they get must be one of their data settings, and a Secret's keys (secretRef) would reach "
    "them unjudged (PYTHONPATH, HTTPS_PROXY, ...); the team token is set in them for you and goes only to the "
    "platform's Hub, never under another name (an S3 ENDPOINT of your choosing). Put a credential of your own "
    "in a data setting read from your own Secret: env: [{name: ACCESS_TOKEN (or ACCESS_KEY_ID, "
    "SECRET_ACCESS_KEY), valueFrom: {secretKeyRef: {name: <your Secret>, key: <key>}}}]",
    _initializer_secrets,
)
