"""audit/gate_formats.py and audit/gate_diff.py: the gate entries of block, quantized and diff audits.

They kill mutants that mutmut found surviving the rest of the suite, each with an expectation
worked in the test (docs/design/mutation-testing.md)."""
