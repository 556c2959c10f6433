"""audit/gate.py, the baseline side: recording a baseline, loading it, comparing a run with it, tolerances.

They kill mutants that mutmut found surviving the rest of the suite, each with an expectation
worked in the test (docs/design/mutation-testing.md)."""
