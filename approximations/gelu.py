"""GELU and its approximations.

GELU(x) = x Phi(x) (Hendrycks & Gimpel, "Gaussian Error Linear Units", 2016,
arXiv:1606.08415), where Phi is the standard normal CDF.
"""

import math

from audit.candidates import candidate

SQRT_HALF = math.sqrt(0.5)
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
HENDRYCKS = "Hendrycks & Gimpel 2016, arXiv:1606.08415"


def sigmoid(t, m):
    return 1 / (1 + m.exp(-t))


@candidate("gelu.erf", reference="gelu", formula="0.5 x (1 + erf(x / sqrt(2)))",
           source=f"{HENDRYCKS}; torch.nn.functional.gelu(approximate='none')",
           notes="1 + erf cancels in the negative tail")
def gelu_erf(x, m):
    return 0.5 * x * (1 + m.erf(x * SQRT_HALF))


@candidate("gelu.erfc", reference="gelu", formula="0.5 x erfc(-x / sqrt(2))",
           source=f"{HENDRYCKS}; erfc form without cancellation")
def gelu_erfc(x, m):
    return 0.5 * x * m.erfc(-x * SQRT_HALF)


@candidate("gelu.tanh", reference="gelu",
           formula="0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))",
           source=f"{HENDRYCKS} eq. tanh approximation; BERT modeling.py gelu; "
                  "torch.nn.functional.gelu(approximate='tanh')")
def gelu_tanh(x, m):
    inner = SQRT_2_OVER_PI * (x + 0.044715 * (x * x * x))
    return 0.5 * x * (1 + m.tanh(inner))


@candidate("gelu.sigmoid", reference="gelu", formula="x sigmoid(1.702 x)",
           source=f"{HENDRYCKS} section 2 (x sigma(1.702x)); CANN FastGelu")
def gelu_sigmoid(x, m):
    return x * sigmoid(1.702 * x, m)
