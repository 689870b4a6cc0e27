"""Names upstream projects define (labels, annotations, API groups, controller and framework names, resources).

One module per project, each written once here and read by every layer; standard library only, so
`manifests/`, `policy_rules/` and the CrossGuard pack can import it. API versions of the components the
platform installs are not here: they come from `versions/matrix.yaml` (`apiVersions`, per release).
A unit test fails when such a name is spelled anywhere else in the package.
"""
