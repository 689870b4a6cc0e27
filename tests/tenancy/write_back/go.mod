module trainer-platform/write-back

go 1.24

// The Trainer API version Kueue's TrainJob integration is built against (Kueue 0.18.3 and 0.19.2 go.mod).
require github.com/kubeflow/trainer/v2 v2.2.1
