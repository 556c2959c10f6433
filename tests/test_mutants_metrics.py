"""audit/metrics.py: ULP and relative errors, their reductions and summaries.

They kill mutants that mutmut found surviving the rest of the suite, each with an expectation
worked in the test (docs/design/mutation-testing.md)."""
