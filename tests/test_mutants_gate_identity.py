"""audit/gate_identity.py and audit/gate_schema.py: the run identity a baseline is bound to, and the spec keys.

They kill mutants that mutmut found surviving the rest of the suite, each with an expectation
worked in the test (docs/design/mutation-testing.md)."""
