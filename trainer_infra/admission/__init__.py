"""The vocabulary of the platform's admission policies: what a rule, an admitted kind and the stack's admission
facts are, and the CEL building blocks. Below the areas, so each area's rules (`tenancy/admission/`,
`datacache/admission.py`) are written in it and `tenancy/admission/registry.py` lists them all."""
