"""audit/clip.py: the safe clip range, its tolerance, saturation values and the clipped candidate.

They kill mutants that mutmut found surviving the rest of the suite, each with an expectation
worked in the test (docs/design/mutation-testing.md)."""
