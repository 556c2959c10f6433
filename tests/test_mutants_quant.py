"""audit/quant.py: quantized (int8/int16) outputs, their codes, scales and errors.

They kill mutants that mutmut found surviving the rest of the suite, each with an expectation
worked in the test (docs/design/mutation-testing.md)."""
