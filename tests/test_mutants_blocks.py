"""audit/blocks.py: MX and NVFP4 block audits, block scales and element codes.

They kill mutants that mutmut found surviving the rest of the suite, each with an expectation
worked in the test (docs/design/mutation-testing.md)."""
