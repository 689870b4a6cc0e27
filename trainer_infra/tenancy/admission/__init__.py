"""The platform's own admission layer for team namespaces: ValidatingAdmissionPolicies (GA in Kubernetes 1.30),
rendered here, enforced by the API server, no controller to run.

A team member is hostile input. What they control reaches pods through TrainJobs (`runtimePatches`),
TrainingRuntimes (`manageRuntimes`), and from there JobSets and Pods; each kind (`kinds.py`) gets one policy
holding every rule of `registry.py` that names it. A TrainJob or TrainingRuntime is refused at create, with the
reason, before anything is half-created; the JobSet and Pod policies are the backstop for any other route.
TrainJobs must also name one of the team's LocalQueues (otherwise Kueue never sees them: no quota), and only
Kueue may lift `spec.suspend` (otherwise a member starts pods Kueue did not admit).

Scope: namespaces labelled with the team label (members cannot label namespaces). Per-team allow-lists are
annotations on the team namespace (`policy.namespace_annotations`), read through `namespaceObject`: members
cannot edit namespaces, there is no parameter object that could be missing, and each policy keeps the same size
whatever the number of teams. (A CEL map literal of every team passed the API server's 100,000-character
expression limit at about 590 teams: `make bench-pulumi` failed at 1,000.)

A new rule is one `AdmissionRule` (`admission/model.py`) in a module of this package (or of the area whose feature
it bounds: `datacache/admission.py`) plus one line in `registry.py`.
"""
