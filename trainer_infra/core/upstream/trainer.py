"""Names Kubeflow Trainer v2 defines (kubeflow/trainer `pkg/constants`, `pkg/apis/trainer`, the Python SDK)."""

from __future__ import annotations

from trainer_infra.core.upstream import nvidia

#: The API group of TrainJobs and (Cluster)TrainingRuntimes (version: the matrix's `apiVersions`).
GROUP = "trainer.kubeflow.org"
#: the Go module of Trainer's releases (the initializers' Python sources live in it too: pkg/initializers)
GO_MODULE = "github.com/kubeflow/trainer/v2"
#: The controller manager's Configuration (`pkg/apis/config/v1alpha1`).
CONFIG_GROUP = f"config.{GROUP}"
CONFIG_API = f"{CONFIG_GROUP}/v1alpha1"
#: The runtime label naming its ML framework (`torch`, `deepspeed`, …).
FRAMEWORK_LABEL = f"{GROUP}/framework"
#: On the Job template of a replicatedJob: the step it runs, read by the webhook and the SDK.
ANCESTOR_LABEL = f"{GROUP}/trainjob-ancestor-step"
#: The runtime label marking its support status (`deprecated`).
SUPPORT_LABEL = f"{GROUP}/support"
#: The limits the kubeflow SDK (get_container_devices in kubeflow/trainer/backends/kubernetes/utils.py, as
#: pinned by the test extra in pyproject.toml) reads a trainer's device from; a `node` container with limits
#: but none of these (e.g. only `amd.com/gpu`) makes it raise "Unknown device type", so
#: TrainerClient().list_runtimes() fails for every runtime of the namespace.
SDK_DEVICE_LIMITS = (nvidia.GPU, "google.com/tpu", "huawei.com/Ascend910", "cpu")
SDK_DEVICE_PREFIXES = (nvidia.MIG_PREFIX,)

# -- the initializers' configuration (pkg/initializers, 2.2.1) -----------------------------------------------
#: Where the initializers read their data from: Trainer sets it from `storageUri` (pkg/initializers/utils/utils.py
#: STORAGE_URI_ENV; dataset/__main__.py and model/__main__.py pick the provider by its scheme).
STORAGE_URI_ENV = "STORAGE_URI"
#: Everything else they read as configuration: `utils.get_config_from_env` reads each field of the provider's
#: dataclass upper-cased (pkg/initializers/types/types.py: HuggingFace*Initializer `access_token`,
#: `ignore_patterns`; S3*Initializer `endpoint`, `access_key_id`, `secret_access_key`, `region`, `role_arn`;
#: CacheDatasetInitializer `metadata_loc`; the cache's sizes and image are pinned by the platform:
#: datacache/pinned.py). The kubeflow SDK writes the same names (backends/kubernetes/utils.py
#: get_optional_initializer_envs). Where the data is and how to authenticate to it: none changes the code.
INITIALIZER_DATA_ENV = (
    "ACCESS_KEY_ID",
    "ACCESS_TOKEN",
    "ENDPOINT",
    "IGNORE_PATTERNS",
    "METADATA_LOC",
    "REGION",
    "ROLE_ARN",
    "SECRET_ACCESS_KEY",
)

# -- the TrainJob status server (KEP-2779, alpha in 2.2 and 2.3) --------------------------------------------
#: The feature gate that starts the status server in the controller (pkg/features/features.go: Alpha, off).
STATUS_GATE = "TrainJobStatus"
#: Its port (chart values.yaml `manager.config.statusServer.port`; templates/manager/deployment.yaml and
#: service.yaml name it `status-server`, 10443, on the webhook's Service).
STATUS_PORT = 10443
STATUS_PORT_NAME = "status-server"
#: The projected volume Trainer adds to every trainer pod (pkg/runtime/framework/plugins/trainjobstatus/
#: trainjobstatus.go createTokenVolume): a ServiceAccount token for the job's audience (`path` token,
#: expirationSeconds 3600) and the CA of the ConfigMap `<trainjob>-tls-config` (`ca.crt`), mounted read-only at
#: STATUS_MOUNT_PATH in every trainer container (createTokenVolumeMount).
STATUS_TOKEN_VOLUME = "kubeflow-trainer-token"
STATUS_MOUNT_PATH = "/var/run/secrets/kubeflow/trainer"
STATUS_TOKEN_FILE = "token"
STATUS_CA_FILE = "ca.crt"
#: `<trainjob>` + this: the ConfigMap holding the CA (trainjobstatus.go buildStatusServerCaCrtConfigMap).
STATUS_CONFIG_MAP_SUFFIX = "-tls-config"
#: The audiences' prefix (pkg/statusserver/utils.go TokenAudiencePrefix): the server accepts only a token whose
#: audience is the job's own and whose namespace claim is the job's (auth.go Authorize).
STATUS_AUDIENCE_PREFIX = GROUP
#: The env Trainer sets in every trainer container (trainjobstatus.go createEnvVars), read by the SDK's
#: update_trainjob_status() (kubeflow 0.5.0 kubeflow/trainer/backends/kubernetes/utils.py).
STATUS_URL_ENV = "KUBEFLOW_TRAINER_SERVER_URL"
STATUS_CA_ENV = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
STATUS_TOKEN_ENV = "KUBEFLOW_TRAINER_SERVER_TOKEN"
STATUS_ENV = (STATUS_URL_ENV, STATUS_CA_ENV, STATUS_TOKEN_ENV)


def status_path(namespace: str, name: str) -> str:
    """The status endpoint of TrainJob `namespace/name` (pkg/statusserver/utils.go StatusUrl)."""
    return f"/apis/{GROUP}/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status"


def status_audience(namespace: str, name: str) -> str:
    """The token audience of TrainJob `namespace/name` (pkg/statusserver/utils.go TokenAudience)."""
    return f"{STATUS_AUDIENCE_PREFIX}/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status"


def status_env(base_url: str, namespace: str, name: str) -> dict[str, str]:
    """The env Trainer gives TrainJob `namespace/name`'s trainer containers; `base_url`:
    `https://<webhook service>.<controller namespace>.svc:<port>` (createEnvVars)."""
    return {
        STATUS_URL_ENV: base_url + status_path(namespace, name),
        STATUS_CA_ENV: f"{STATUS_MOUNT_PATH}/{STATUS_CA_FILE}",
        STATUS_TOKEN_ENV: f"{STATUS_MOUNT_PATH}/{STATUS_TOKEN_FILE}",
    }
