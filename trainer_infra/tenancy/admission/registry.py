"""The admission rules, in the order each kind's policy checks them. A new rule is one `AdmissionRule` in a
module of this package plus one line here; the kinds it names get it in their policy."""

from __future__ import annotations

from trainer_infra.admission.model import AdmissionRule
from trainer_infra.core.registry import Registry
from trainer_infra.datacache import admission as datacache
from trainer_infra.storage import admission as storage
from trainer_infra.tenancy.admission import (
    devices,
    hub_token,
    images,
    notebook,
    patches,
    pod_security,
    pods,
    queues,
    requests,
    services,
    status_server,
    write_back,
)

RULES: Registry[AdmissionRule] = Registry(
    requests.KNOWN_TEAM,
    *pods.RULES,  # one per rule of manifests/pod_rules.py
    images.POD_IMAGES,
    hub_token.TEAM_TOKEN,
    devices.DEVICE_ENV,
    devices.RESOURCE_CLAIMS,
    storage.JOB_NAME,
    storage.JOB_DIRECTORY_MOUNT,
    datacache.DEPUTY_PODS,
    pod_security.SECCOMP,
    pod_security.APPARMOR,
    pod_security.SELINUX,
    pod_security.SYSCTLS,
    pod_security.PROC_MOUNT,
    pod_security.RESTRICTED,
    requests.CLAIM_TEMPLATES,
    requests.PATCH_CLAIM_VOLUME,
    requests.QUEUE,
    requests.SUSPEND,
    queues.POD_QUEUE,
    images.TRAINER_IMAGE,
    devices.TRAINER_DEVICE_ENV,
    status_server.TRAINER_STATUS_ENV,
    storage.TRAINER_JOB_NAME,
    hub_token.TRAINER_TOKEN,
    hub_token.INITIALIZER_HUB,  # before initializerEnv, which refuses them too, to name the platform's way first
    datacache.INITIALIZER_ENV,
    hub_token.INITIALIZER_SECRETS,  # a Secret's keys (secretRef) would bypass initializerEnv
    datacache.DEPUTY_RUNTIME,
    patches.CONTROLLER_LABELS,
    notebook.NOTEBOOK_LABEL_RULE,
    patches.INITIALIZER_PATCHES,
    *write_back.RULES,  # one per part of the spec (trainer, initializer, runtimePatches, the rest)
    services.CLUSTER_IP,
    services.NO_EXTERNAL,
    *datacache.CREATED,  # what the cache initializer creates: its LeaderWorkerSet, Service and ServiceAccount
)
