"""audit/gate.py, the spec side: loading and validating a gate spec, its entries and targets, running them.

They kill mutants that mutmut found surviving the rest of the suite, each with an expectation
worked in the test (docs/design/mutation-testing.md)."""
